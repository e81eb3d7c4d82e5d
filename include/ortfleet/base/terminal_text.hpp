#pragma once
// Text a user or a file named (a path, a model's name, an input's, output's or node's name, a library's
// error) on its way to a terminal: an escape sequence in a name would otherwise drive the terminal (set
// its title, clear the screen, move the cursor) and a newline in it would fake a row of a table or a
// line of a log. Every place ortfleet prints such a name (tables, errors, logs, reports on stdout and
// stderr, Python's error messages) passes it through terminal_text.
#include <string>
#include <string_view>

namespace ortfleet {

/// `text` as it may reach a terminal: every control character written as an escape a person reads
/// (\n, \r, \t, \e for ESC, \a for BEL, \xNN for the other C0 bytes and DEL, \u0085 for the C1 controls
/// and the bidirectional overrides U+202A..U+202E and U+2066..U+2069), and each byte of invalid UTF-8
/// as \xNN. Printable text, UTF-8 letters and symbols included, is left as it is, and so is a
/// backslash: passing text through it twice changes nothing more than once.
std::string terminal_text(std::string_view text);

/// The same for text whose lines are the program's own (what a command writes to stdout or stderr):
/// each line break kept as it is, everything else as terminal_text writes it. The command line's
/// streams pass through it, so that a name printed anywhere can drive no terminal; a newline inside a
/// name is escaped where the name is printed (terminal_text), or it would start a line of its own.
std::string terminal_lines(std::string_view text);

}  // namespace ortfleet
