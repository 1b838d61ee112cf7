// Shell quoting (harness/core/shell.h), the one rule for every command the harness prints,
// stores or runs: safe words stay readable, everything else survives a real /bin/sh.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/core/shell.h"
#include "tests/support/command.h"

namespace attnbench {
namespace {

TEST(ShellQuote, SafeWordsStayAsTheyAre) {
  for (const std::string word : {"b=1,hq=2,hkv=2,sq=33,sk=33,d=16,dtype=fp32", "cpu.flash", "--kernels",
                                 "cuda:0", "/work/build/bin/attnbench", "a@b%c+d_e-f", "results/x.sqlite"}) {
    EXPECT_EQ(shell_quote(word), word);
  }
}

TEST(ShellQuote, EverythingElseInSingleQuotes) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("two words"), "'two words'");
  EXPECT_EQ(shell_quote("mask=window(2,0)"), "'mask=window(2,0)'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("'"), "''\\'''");
  EXPECT_EQ(shell_quote("$(id)"), "'$(id)'");
  EXPECT_EQ(shell_quote("cpu.masked_*"), "'cpu.masked_*'");
  EXPECT_EQ(shell_quote("caf\xc3\xa9"), "'caf\xc3\xa9'");
}

TEST(ShellQuote, EveryWordSurvivesARealShell) {
  const std::vector<std::string> words = {
      "plain", "", "two words", "it's", "'", "''", "\"double\"", "back\\slash", "$HOME", "$(id)", "`id`",
      "*", "?", "[ab]", "{a,b}", "~", "#comment", "!bang", "a;b", "a&b", "a|b", "<in", ">out", "(x)",
      "tab\there", "new\nline", "caf\xc3\xa9", "H200 \"SXM\" \\ \x01\t"};
  for (const std::string& word : words) {
    const CommandResult printed = run_shell("printf '%s' " + shell_quote(word));
    EXPECT_EQ(printed.exit_code, 0) << word;
    EXPECT_EQ(printed.output, word) << shell_quote(word);
  }
  const CommandResult joined = run_shell("printf '[%s]' " + shell_join(words));
  std::string expected;
  for (const std::string& word : words) expected += "[" + word + "]";
  EXPECT_EQ(joined.output, expected);
}

TEST(ShellJoin, WordsQuotedAndSpaced) {
  EXPECT_EQ(shell_join({}), "");
  EXPECT_EQ(shell_join({"attnbench", "run", "--shape", "b=1,hq=2,s=8,d=16,mask=window(2,0)", "--db", "my db"}),
            "attnbench run --shape 'b=1,hq=2,s=8,d=16,mask=window(2,0)' --db 'my db'");
  EXPECT_EQ(shell_join({"", "x"}), "'' x");
}

}  // namespace
}  // namespace attnbench
