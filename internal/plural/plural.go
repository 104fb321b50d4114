// Package plural writes counts with their noun in the right number:
// "1 function", "2 functions".
package plural

import (
	"strconv"
	"strings"
)

// Integer is any integer type a count comes in.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Count is n and noun, in the plural unless n is 1: "1 entry",
// "3 entries", "0 processes". The plural is the English rule's: -s, -es
// after s, x, z, ch or sh, -ies for a consonant before the final y.
func Count[N Integer](n N, noun string) string {
	s := strconv.FormatUint(uint64(n), 10)
	if n < 0 {
		s = strconv.FormatInt(int64(n), 10)
	}
	if n == 1 {
		return s + " " + noun
	}
	return s + " " + Of(noun)
}

// Of is the plural of noun (its last word, for a phrase such as
// "ringbuf drop").
func Of(noun string) string {
	switch {
	case noun == "":
		return noun
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "z"),
		strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}
