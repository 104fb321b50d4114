package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSameBuildMtime(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "ftprobe")
	guest := filepath.Join(dir, "ftprobe-linux-arm64")
	for _, p := range []string{self, guest} {
		if err := os.WriteFile(p, []byte("not a Go binary"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	set := func(p string, at time.Time) {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	set(self, now)
	set(guest, now.Add(-30*time.Second)) // make cross: seconds apart
	if err := sameBuild(self, guest); err != nil {
		t.Errorf("guest 30 s older: %v, want no error", err)
	}
	set(guest, now.Add(-2*time.Hour-26*time.Minute)) // make build alone: a stale guest
	err := sameBuild(self, guest)
	if err == nil || !strings.Contains(err.Error(), "2h26m0s older than") {
		t.Errorf("guest 2h26m older: %v, want an error saying so", err)
	}
	set(guest, now.Add(time.Hour)) // newer guest: built after, fine
	if err := sameBuild(self, guest); err != nil {
		t.Errorf("guest newer: %v, want no error", err)
	}
}

func TestVCSMismatch(t *testing.T) {
	stamps := map[string][2]string{
		"self":      {"1111111111111111111111111111111111111111", "true"},
		"same":      {"1111111111111111111111111111111111111111", "true"},
		"clean":     {"1111111111111111111111111111111111111111", "false"},
		"other":     {"2222222222222222222222222222222222222222", "true"},
		"selfclean": {"1111111111111111111111111111111111111111", "false"},
		"unstamped": {"", ""},
	}
	of := func(p string) (string, string) { return stamps[p][0], stamps[p][1] }
	for guest, want := range map[string]string{
		"same":      "",
		"unstamped": "",
		"clean":     "clean was built from 1111111111111111111111111111111111111111 (modified false), self from 1111111111111111111111111111111111111111 (modified true)",
		"other":     "other was built from 2222222222222222222222222222222222222222 (modified true), self from",
	} {
		same, err := vcsMismatch(guest, of, "self")
		switch {
		case same:
			t.Errorf("%s: same build of a modified tree: the stamps cannot tell", guest)
		case want == "" && err != nil:
			t.Errorf("%s: %v, want no error", guest, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s: %v, want %q...", guest, err, want)
		}
	}
	// One clean revision on both sides: the same code, however old.
	stamps["self"] = stamps["selfclean"]
	if same, err := vcsMismatch("clean", of, "self"); !same || err != nil {
		t.Errorf("clean guest of a clean self: same %v, %v; want same", same, err)
	}
}
