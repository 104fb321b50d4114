package ftprobe

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The project speaks of the product, never of how it was made: no work
// diary in its prose (documentation, comments, test names, help texts).
// diaryRules are the marks of one, each a rule name and its pattern.
var diaryRules = []struct {
	name string
	re   *regexp.Regexp
}{
	// "session 18", not fsession or kprobe.session (kernel names).
	{"session N", regexp.MustCompile(`(?i)(?:^|[^\w.])(session\s+#?\d+)`)},
	{"stop N", regexp.MustCompile(`(?i)\b(stop\s+#?\d+)`)},
	// "reviewer" always; "review" as a noun: after a determiner or
	// preposition or "(", or before ":", ",", ")", "of", "fix"...
	{"review", regexp.MustCompile(`(?i)(\breviewers?\b|(?:\b(?:the|a|an|this|that|its|their|our|per|after|before|from|in|of|by|on|each|every|one|first|second|last)\s+|'s\s+|\()reviews?\b|\breviews?(?:\s*[:,)]|\s+(?:of|fix|fixes|finding|findings|note|notes|round|comment|comments)\b))`)},
	{"issue N", regexp.MustCompile(`(?i)\b(issues?\s+#?\d+)`)},
	{"the issue", regexp.MustCompile(`(?i)\b(the\s+issues?\b(?:'s)?)`)},
}

var (
	// hexWord is a word of 7 to 40 lower-case hex digits: an abbreviated
	// or full commit hash when it has both digits and letters.
	hexWord = regexp.MustCompile(`[0-9a-f]{7,40}`)
	// uuid is stripped first: a boot id is not a commit.
	uuid = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// citedCommit: a kernel commit cited as a source.
	citedCommit = regexp.MustCompile(`(?:\bcommit|Fixes:) $`)
	binaryLit   = regexp.MustCompile(`^0b[01]+$`)
)

// diaryFinding is one mark of a diary in a text: its line, the rule it
// breaks and the words that break it.
type diaryFinding struct {
	line       int
	rule, text string
}

// diaryFindings returns every mark of a work diary in text.
func diaryFindings(text string) []diaryFinding {
	var out []diaryFinding
	for i, line := range strings.Split(text, "\n") {
		for _, r := range diaryRules {
			for _, m := range r.re.FindAllStringSubmatch(line, -1) {
				out = append(out, diaryFinding{i + 1, r.name, m[1]})
			}
		}
		for _, h := range commitHashes(line) {
			out = append(out, diaryFinding{i + 1, "commit hash", h})
		}
	}
	return out
}

// commitHashes returns the words of line that read as a commit hash and
// are not cited as one ("commit 473e3150e30a", "Fixes: ..."). Kernel
// addresses (ffff...), the hex alphabet, binary literals and UUIDs are
// not hashes; 0x-prefixed numbers are not words of their own.
func commitHashes(line string) []string {
	line = uuid.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat("-", len(s)) })
	var out []string
	for _, loc := range hexWord.FindAllStringIndex(line, -1) {
		a, b := loc[0], loc[1]
		w := line[a:b]
		switch {
		case a > 0 && isWordByte(line[a-1]), b < len(line) && isWordByte(line[b]):
		case !strings.ContainsAny(w, "0123456789") || !strings.ContainsAny(w, "abcdef"):
		case strings.HasPrefix(w, "ffff"), w == "0123456789abcdef", binaryLit.MatchString(w):
		case citedCommit.MatchString(line[:a]):
		default:
			out = append(out, w)
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// proseFile reports whether path (slash-separated, relative to the
// repository) is scanned: README.md, docs' Markdown, Go sources but the
// generated bpf2go ones, bpf/*.c, every *.h, scripts/ (data files aside),
// Makefile and Dockerfile.
func proseFile(path string) bool {
	base := filepath.Base(path)
	switch {
	case path == "README.md", path == "Makefile", path == "Dockerfile":
		return true
	case strings.HasSuffix(path, "_bpfel.go"):
		return false
	case strings.HasSuffix(path, ".go"), strings.HasSuffix(path, ".h"):
		return true
	case strings.HasPrefix(path, "docs/"):
		return strings.HasSuffix(path, ".md")
	case strings.HasPrefix(path, "bpf/"):
		return strings.HasSuffix(path, ".c")
	case strings.HasPrefix(path, "scripts/"):
		ext := filepath.Ext(base)
		return ext != ".json" && ext != ".svg" && ext != ".txt" && base != "go.sum"
	}
	return false
}

// scanDiary returns "path:line: rule: text" for every mark of a diary in
// the prose files under root.
func scanDiary(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "dist", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		// The rules' own files state them by example: this one, and the
		// help texts' check (cmd/ftprobe/help_test.go) feeds planted
		// history to its own patterns.
		if !d.Type().IsRegular() || !proseFile(rel) || rel == "prose_test.go" || rel == "cmd/ftprobe/help_test.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range diaryFindings(string(b)) {
			out = append(out, fmt.Sprintf("%s:%d: %s: %q", rel, f.line, f.rule, f.text))
		}
		return nil
	})
	return out, err
}

// TestNoWorkDiary: the repository's prose has no session or stop numbers,
// reviews, issue numbers or commit hashes of its own making.
func TestNoWorkDiary(t *testing.T) {
	found, err := scanDiary(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestDiaryFindings: the checker on lines that are a diary and lines
// that only look like one.
func TestDiaryFindings(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: the rule broken, "" for none
	}{
		{"// session 3: fixed", "session N"},
		{"measured in Session 12 on arm64", "session N"},
		{"after stop 26 the floor moved", "stop N"},
		{"(review: it was kept)", "review"},
		{"the reviewer asked for it", "review"},
		{"review fixes: errors name the mode", "review"},
		{"TestModuleFunction (issue 14): --arg", "issue N"},
		{"the issue's target is arm64", "the issue"},
		{"ftprobe 95ce983, docs/window-amd64-7.3.txt", "commit hash"},
		{"docs/floor-arm64-7.3-icount-4d36412.txt", "commit hash"},
		{"built from 9996f557615499f0a557e5aff1ae0e24fcac0388", "commit hash"},
		{"fsession 7.0 and kprobe.session 6.10 keep a session cookie", ""},
		{"fentry/fexit 5.5 (commit fec56f5890d9), kprobe.multi", ""},
		{"Fixes: 473e3150e30a (\"bpf, x86: allow function arguments\")", ""},
		{"mov r1, 0x1234abcd; ja +0", ""},
		{"ffff8000803a8318 T vfs_read", ""},
		{"0d6e1c3a-5b1f-4d3e-9c55-1c2b3a4d5e6f", ""},
		{`const hex = "0123456789abcdef"`, ""},
		{"want := 0b11110", ""},
		{"deadbeef cafebabe 12345678", ""},
		{"review the plan with --dry-run", ""},
		{"the timed body stops 3 ns later", ""},
	} {
		got := diaryFindings(c.in)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%q: %v, want nothing", c.in, got)
		case c.want != "" && (len(got) != 1 || got[0].rule != c.want):
			t.Errorf("%q: %v, want one %q", c.in, got, c.want)
		}
	}
}

// TestScanDiaryPlanted: the scan walks a tree and finds a planted diary
// comment in a Go file, and only there: generated and data files are not
// prose.
func TestScanDiaryPlanted(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"internal/x/x.go":            "package x\n\n// session 3: fixed\nfunc f() {}\n",
		"internal/x/clean.go":        "package x\n\n// f counts the calls.\n",
		"internal/bpfobj/t_bpfel.go": "// session 3: generated\n",
		"docs/bench/r.json":          `{"note": "session 3"}`,
		"docs/bench/r.txt":           "ftprobe 95ce983\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := scanDiary(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`internal/x/x.go:3: session N: "session 3"`}
	if fmt.Sprint(found) != fmt.Sprint(want) {
		t.Errorf("scan found %q, want %q", found, want)
	}
}
