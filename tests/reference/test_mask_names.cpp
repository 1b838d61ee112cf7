// Mask names (reference/mask.h): one spelling, reached by kind or by mask, parsed back, listed
// in messages.
#include <gtest/gtest.h>

#include <string>

#include "reference/mask.h"

namespace attnbench {
namespace {

constexpr MaskKind kKinds[] = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                               MaskKind::padding};

TEST(MaskNames, EachKindHasOneName) {
  EXPECT_EQ(mask_name(MaskKind::none), "none");
  EXPECT_EQ(mask_name(MaskKind::causal), "causal");
  EXPECT_EQ(mask_name(MaskKind::causal_br), "causal_br");
  EXPECT_EQ(mask_name(MaskKind::window), "window");
  EXPECT_EQ(mask_name(MaskKind::padding), "padding");
}

TEST(MaskNames, AMasksNameIsItsKindsWithWindowBounds) {
  for (MaskKind kind : kKinds) {
    const Mask mask{kind, 3, 0};
    const std::string name = mask_name(mask);
    EXPECT_EQ(name.substr(0, name.find('(')), mask_name(kind));
    const auto parsed = parse_mask(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(parsed->kind, kind) << name;
  }
  EXPECT_EQ(mask_name(Mask{MaskKind::window, -1, 0}), "window(-1,0)");
  EXPECT_FALSE(parse_mask("window"));  // a window needs its bounds
  EXPECT_FALSE(parse_mask("causal_tl"));
}

TEST(MaskNames, TheAcceptedListNamesEveryKind) {
  EXPECT_EQ(accepted_mask_names(),
            "none, causal, causal_br, window(L,R) with L, R >= -1 (-1 = unbounded), padding");
  for (MaskKind kind : kKinds) {
    EXPECT_NE(accepted_mask_names().find(std::string(mask_name(kind))), std::string::npos);
  }
}

}  // namespace
}  // namespace attnbench
