// base64: RFC 4648's test vectors both ways, every length round trip, the
// forms clients send (no padding, MIME line breaks), and what is refused.
#include "core/base64.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

TEST(Base64, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), plain);
  }
}

TEST(Base64, EveryLengthAndByteRoundTrips) {
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes) << n << " bytes";
    bytes.push_back(static_cast<char>((n * 131 + 7) & 0xff));
  }
}

TEST(Base64, TakesMissingPaddingAndLineBreaks) {
  EXPECT_EQ(base64_decode("Zm9vYg"), "foob");
  EXPECT_EQ(base64_decode("Zm9vYmE"), "fooba");
  EXPECT_EQ(base64_decode("Zm9v\r\nYmFy\n"), "foobar");
  EXPECT_EQ(base64_decode(" Zm 9v\tYg== "), "foob");
}

TEST(Base64, RefusesWhatNoEncoderWrites) {
  for (const char* bad : {"Zm9v!", "Zm9vYg==Zg", "Z", "Zm9vY", "Zm9vYg===", "-_-_"}) {
    EXPECT_THROW(base64_decode(bad), Error) << bad;
  }
  try {
    base64_decode("Zm$v");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("character 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe
