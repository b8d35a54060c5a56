package ui

import "gseproc/model"

// Text from the fleet (host labels, process names, messages, events,
// errors) is drawn into the console's frame and copied to the clipboard
// as it came: a label holding "\x1b]52;c;…\a" or "\x1b[2J" would drive
// the operator's terminal (set its clipboard, its title, clear it,
// answer queries into the input). One filter, at the two places text
// leaves for the terminal, makes that impossible whatever path the text
// took: the frame keeps only our own styling (SGR: ESC [ digits m), the
// clipboard only text. Layout is not disturbed: the widths were counted
// with ansi.StringWidth, which gives escape sequences and controls none.

// termSafe is frame without any escape sequence but SGR, and without
// control characters but newline and tab.
func termSafe(frame string) string { return model.StyledText(frame) }

// clipSafe is text without any escape sequence or control character but
// newline and tab: what may go on the clipboard (a paste of it cannot end
// a bracketed paste or type keys).
func clipSafe(text string) string { return model.PlainText(text) }
