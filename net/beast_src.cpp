// The compiled parts of Asio and Beast, built once here: the library's other
// files define BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION (CMakeLists.txt), which cuts each of
// their compile times.
//
// GCC 12 with the sanitizers reports a false -Wmaybe-uninitialized inside
// Beast's parser (a boost::optional returned empty); it is Boost's code, not
// ours, and -Werror would stop the ASan build on it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
