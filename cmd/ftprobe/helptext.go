package main

import "strings"

// helpWidth is the width long help texts are wrapped to.
const helpWidth = 79

// wrap fills text into lines of at most width columns (a longer word
// stays whole), the first starting with first and the others with
// indent.
func wrap(text, first, indent string, width int) string {
	var b strings.Builder
	line := first
	empty := true
	for _, w := range strings.Fields(text) {
		if !empty && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
