// The compiled parts of Asio and Beast, built once here: the library's other
// files define BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION (CMakeLists.txt), which cuts each of
// their compile times.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
