// Names reach a terminal as text (ortfleet/base/terminal_text.hpp): issue 58 found a model named
// `evil\033[31m...\033]0;TITLE\007\033[2J.onnx` setting the window title and clearing the screen
// from start, its error, pool status, cache list, bench, doctor and profile.
#include "ortfleet/base/terminal_text.hpp"

#include <gtest/gtest.h>

#include "ortfleet/base/error.hpp"

namespace ortfleet {

TEST(TerminalText, ControlCharactersAndInvalidUtf8AreEscapedAndTextIsKept) {
  EXPECT_EQ(terminal_text("models/résumé × 2.onnx"), "models/résumé × 2.onnx");
  EXPECT_EQ(terminal_text("evil\033[31mred\033]0;TITLE\007\033[2J.onnx"), "evil\\e[31mred\\e]0;TITLE\\a\\e[2J.onnx");
  EXPECT_EQ(terminal_text("a\nb\rc\td\x01\x7f"), "a\\nb\\rc\\td\\x01\\x7f");
  EXPECT_EQ(terminal_text(std::string("nul\0byte", 8)), "nul\\x00byte");
  // C1 controls written in UTF-8 (CSI, OSC, NEL) and bidirectional overrides.
  EXPECT_EQ(terminal_text("\xc2\x9b" "31m\xc2\x85" "x\xe2\x80\xae" "cod.exe"), "\\u009b31m\\u0085x\\u202ecod.exe");
  // Invalid UTF-8: a raw C1 byte (CSI in an 8-bit terminal), a stray continuation, an overlong form, a
  // surrogate, a sequence cut short.
  EXPECT_EQ(terminal_text("\x9b" "2J"), "\\x9b2J");
  EXPECT_EQ(terminal_text("\x80\xc0\xaf\xed\xa0\x80\xe2\x82"), "\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xe2\\x82");
  const std::string once = terminal_text("x\033y\\z");
  EXPECT_EQ(terminal_text(once), once) << "a second pass changes nothing";
}

TEST(TerminalText, AnErrorIsOneLineWithItsNamesEscaped) {
  const Error e("cannot read model evil\033]0;TITLE\007.onnx\nfaked row", "Check\tit", "cpu");
  EXPECT_STREQ(e.what(), "cannot read model evil\\e]0;TITLE\\a.onnx faked row (on cpu). Check it");
  EXPECT_EQ(e.what_failed(), "cannot read model evil\033]0;TITLE\007.onnx\nfaked row") << "the parts stay as given";
}

}  // namespace ortfleet
