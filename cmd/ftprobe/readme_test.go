package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// foreignFlags are the flags README gives to other programs (podman, go,
// make) in its examples; every other --flag it names must be a flag of
// some ftprobe command.
var foreignFlags = []string{"rm", "privileged", "format"}

// TestReadmeFlagsExist reads README.md and checks that every --flag it
// names is a flag of an ftprobe command (or of the programs listed in
// foreignFlags), that every `ftprobe COMMAND` it names is a command and
// every `make TARGET` a Makefile target.
// A flag renamed or removed without the manual following fails here.
func TestReadmeFlagsExist(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	flags := map[string]bool{}
	commands := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		commands[c.Name()] = true
		add := func(f *pflag.Flag) { flags[f.Name] = true }
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	named := regexp.MustCompile(`(?:^|[\s(\x60'"\[|])--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(readme, -1)
	if len(named) < 20 {
		t.Fatalf("README names only %d flags: is this the manual?", len(named))
	}
	seen := map[string]bool{}
	for _, m := range named {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		if !flags[name] && !slices.Contains(foreignFlags, name) {
			t.Errorf("README names --%s, which no ftprobe command has", name)
		}
	}
	// A command line: in a code block ("$ ftprobe ...", "ftprobe ...") or
	// in backquotes in prose.
	var code strings.Builder
	for i, part := range strings.Split(readme, "\x60\x60\x60") {
		if i%2 == 1 {
			code.WriteString(part)
		}
	}
	lines := regexp.MustCompile(`(?m)^\s*(?:\$ )?(?:bin/)?ftprobe ([a-z][a-z-]+)`).FindAllStringSubmatch(code.String(), -1)
	quoted := regexp.MustCompile("\x60(?:bin/)?ftprobe ([a-z][a-z-]+)").FindAllStringSubmatch(readme, -1)
	for _, m := range append(lines, quoted...) {
		if w := m[1]; !commands[w] {
			t.Errorf("README names `ftprobe %s`, which is not a command", w)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	for _, m := range regexp.MustCompile("(?m)(?:^\\s*|\x60)make ([a-z][a-z-]*)").FindAllStringSubmatch(readme, -1) {
		if !targets[m[1]] {
			t.Errorf("README names `make %s`, which is not a Makefile target", m[1])
		}
	}
}
