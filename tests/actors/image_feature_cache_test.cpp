// The vision actor's cache of recent images' features: found by the image's
// bytes only, most recently used kept, within its byte budget.
#include "actors/image_feature_cache.hpp"

#include <gtest/gtest.h>

#include <string>

namespace troupe {
namespace {

TensorHandle features(int64_t rows, float v) {
  TensorHandle t = make_tensor(rows, 4);
  for (float& x : t->values()) x = v;
  return t;
}

TEST(ImageFeatureCache, FindsTheSameBytesOnly) {
  ImageFeatureCache cache(1 << 20);
  const ImageKey a = ImageKey::of("png bytes A");
  cache.insert(a, features(2, 1.0f));
  ASSERT_NE(cache.find(ImageKey::of("png bytes A")), nullptr);
  EXPECT_EQ(cache.find(ImageKey::of("png bytes A"))->data[0], 1.0f);
  EXPECT_EQ(cache.find(ImageKey::of("png bytes B")), nullptr);
  EXPECT_EQ(cache.find(ImageKey::of("png bytes A ")), nullptr);
  // A key with A's digest but other bytes (a collision of one hash) is not A.
  ImageKey forged = ImageKey::of("png bytes B");
  forged.digest = a.digest;
  EXPECT_EQ(cache.find(forged), nullptr);
}

TEST(ImageFeatureCache, KeysDifferForBytesThatDiffer) {
  EXPECT_EQ(ImageKey::of("abc"), ImageKey::of("abc"));
  EXPECT_NE(ImageKey::of("abc").digest, ImageKey::of("abd").digest);
  EXPECT_NE(ImageKey::of("abc").check, ImageKey::of("abd").check);
  EXPECT_NE(ImageKey::of("").check, ImageKey::of(std::string(1, '\0')).check);
}

TEST(ImageFeatureCache, DropsTheLeastRecentlyUsedWithinItsBudget) {
  const size_t one = 2 * 4 * sizeof(float);  // a [2, 4] tensor
  ImageFeatureCache cache(3 * one);
  for (const char* name : {"a", "b", "c"}) cache.insert(ImageKey::of(name), features(2, 0.0f));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.bytes(), 3 * one);
  ASSERT_NE(cache.find(ImageKey::of("a")), nullptr);  // a is now the most recent
  cache.insert(ImageKey::of("d"), features(2, 0.0f));
  EXPECT_EQ(cache.find(ImageKey::of("b")), nullptr);  // the least recent went
  EXPECT_NE(cache.find(ImageKey::of("a")), nullptr);
  EXPECT_NE(cache.find(ImageKey::of("c")), nullptr);
  EXPECT_NE(cache.find(ImageKey::of("d")), nullptr);
  EXPECT_EQ(cache.bytes(), 3 * one);
  // Larger than the whole budget: not kept, nothing dropped for it.
  cache.insert(ImageKey::of("huge"), features(8, 0.0f));
  EXPECT_EQ(cache.find(ImageKey::of("huge")), nullptr);
  EXPECT_EQ(cache.size(), 3u);
  // The same image again replaces its entry.
  cache.insert(ImageKey::of("a"), features(1, 5.0f));
  EXPECT_EQ(cache.find(ImageKey::of("a"))->rows, 1);
  EXPECT_EQ(cache.bytes(), 2 * one + one / 2);
}

TEST(ImageFeatureCache, ABudgetOfZeroKeepsNothing) {
  ImageFeatureCache cache(0);
  cache.insert(ImageKey::of("a"), features(1, 0.0f));
  EXPECT_EQ(cache.find(ImageKey::of("a")), nullptr);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace troupe
