package lab

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cavaliergopher/cpio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/guest"
)

// Package names and versions as apt-cache listed them for arm64 on 2026-11-29.
var arm64Pkgs = []debPkg{
	{Name: "linux-image-6.1.0-50-arm64", Version: "6.1.158-1", Upstream: "6.1.158", Size: 60 << 20},
	{Name: "linux-image-6.1.0-47-arm64", Version: "6.1.153-1", Upstream: "6.1.153", Size: 60 << 20},
	{Name: "linux-image-6.12.117+deb13-arm64", Version: "6.12.117-1", Upstream: "6.12.117", Size: 93 << 20},
	{Name: "linux-image-6.12.117+deb13-arm64-unsigned", Version: "6.12.117-1", Upstream: "6.12.117", Size: 92 << 20},
	{Name: "linux-image-6.12.107+deb13-arm64", Version: "6.12.107-1", Upstream: "6.12.107", Size: 93 << 20},
	{Name: "linux-binary-unsigned-7.3.4+deb13-arm64", Version: "7.3.4-1~bpo13+1", Upstream: "7.3.4", Size: 12229372},
	{Name: "linux-image-7.1.13+deb13-arm64", Version: "7.1.13-1", Upstream: "7.1.13", Size: 50 << 20},
}

func TestPickKernel(t *testing.T) {
	for want, pkg := range map[string]string{
		"7.3":      "linux-binary-unsigned-7.3.4+deb13-arm64",
		"7.3.4":    "linux-binary-unsigned-7.3.4+deb13-arm64",
		"6.12":     "linux-image-6.12.117+deb13-arm64-unsigned",
		"6.12.107": "linux-image-6.12.107+deb13-arm64",
		"6.1":      "linux-image-6.1.0-50-arm64",
		"latest":   "linux-binary-unsigned-7.3.4+deb13-arm64",
	} {
		p, err := pickKernel(arm64Pkgs, want)
		require.NoError(t, err, want)
		assert.Equal(t, pkg, p.Name, want)
	}
	_, err := pickKernel(arm64Pkgs, "5.10")
	assert.EqualError(t, err, `no Debian kernel "5.10"; available: 6.1, 6.12, 7.1, 7.3`)
	_, err = pickKernel(arm64Pkgs, "6.1")
	assert.NoError(t, err, "6.1 must not match 6.12")
}

func TestKernelPackageNames(t *testing.T) {
	const notKernel = "-" // not a kernel image of arm64
	for name, flavour := range map[string]string{
		"linux-binary-unsigned-7.3.4+deb13-arm64":       "",
		"linux-image-6.12.117+deb13-arm64":              "",
		"linux-image-6.12.117+deb13-arm64-unsigned":     "",
		"linux-image-6.1.0-50-arm64":                    "",
		"linux-image-6.1.0-50-amd64":                    notKernel,
		"linux-image-7.3.4+deb13-arm64-16k":             "16k",
		"linux-image-6.12.117+deb13-arm64-16k-unsigned": "16k",
		"linux-image-7.3.4+deb13-rt-arm64":              "rt",
		"linux-image-6.1.0-50-rt-arm64-unsigned":        "rt",
		"linux-image-7.3.4+deb13-cloud-arm64":           "cloud",
		"linux-binary-unsigned-7.3.4+deb13-cloud-arm64": "cloud",
		"linux-binary-unsigned-7.2.13+deb14-arm64-16k":  "16k",
		"linux-image-7.3.4+deb13-arm64-dbg":             notKernel,
		"linux-image-6.12.117+deb13-rt-arm64-dbg":       notKernel,
		"linux-headers-7.3.4+deb13-arm64":               notKernel,
		"linux-binary-unsigned-7.3.4+deb13-cloud-amd64": notKernel,
	} {
		f, ok := pkgFlavour(name, "arm64")
		if flavour == notKernel {
			assert.False(t, ok, name)
			continue
		}
		assert.True(t, ok, name)
		assert.Equal(t, flavour, f, name)
	}
	f, ok := pkgFlavour("linux-binary-unsigned-7.3.4+deb13-cloud-amd64", "amd64")
	assert.True(t, ok)
	assert.Equal(t, "cloud", f)
}

func TestVersionLess(t *testing.T) {
	assert.True(t, versionLess("6.1.158", "6.12.1"))
	assert.True(t, versionLess("6.12.117", "7.3.4"))
	assert.False(t, versionLess("7.3.4", "7.3.4"))
	assert.True(t, versionLess("7.3.4-1~bpo13+1", "7.3.4-2"))
}

func writeFile(t *testing.T, b []byte, gz bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img")
	if gz {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		b = buf.Bytes()
	}
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestDetectArch(t *testing.T) {
	arm := make([]byte, 4096)
	copy(arm[56:], "ARM\x64")
	x86 := make([]byte, 4096)
	copy(x86[0x202:], "HdrS")
	pe := make([]byte, 4096)
	copy(pe, "MZ")
	pe[0x3c] = 0x80
	copy(pe[0x80:], "PE\x00\x00")
	pe[0x84], pe[0x85] = 0x64, 0xaa
	for name, c := range map[string]struct {
		b    []byte
		gz   bool
		want string
	}{
		"arm64 Image": {arm, false, "arm64"}, "gzip arm64 Image": {arm, true, "arm64"},
		"bzImage": {x86, false, "amd64"}, "EFI arm64": {pe, false, "arm64"},
	} {
		got, err := DetectArch(writeFile(t, c.b, c.gz))
		require.NoError(t, err, name)
		assert.Equal(t, c.want, got, name)
	}
	_, err := DetectArch(writeFile(t, []byte("not a kernel"), false))
	assert.ErrorContains(t, err, "pass --arch")
}

func TestInitramfs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ftprobe")
	require.NoError(t, os.WriteFile(bin, []byte("\x7fELF-fake"), 0o755))
	extra := filepath.Join(dir, "x.test")
	require.NoError(t, os.WriteFile(extra, []byte("test-binary"), 0o755))
	c := Config{Kernel: &Kernel{Arch: "arm64", Version: "7.3.4"}, Binary: bin, Args: []string{"version"},
		Add: []string{extra + ":/tests/x.test"}, Env: []string{"A=b"}}
	out := filepath.Join(dir, "initramfs.cpio")
	require.NoError(t, c.buildInitramfs(out))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	r := cpio.NewReader(f)
	files := map[string]string{}
	links := map[string]string{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Linkname != "" {
			links[h.Name] = h.Linkname
			continue
		}
		b, _ := io.ReadAll(r)
		files[h.Name] = string(b)
	}
	assert.Equal(t, "/bin/ftprobe", links["init"])
	assert.Equal(t, "\x7fELF-fake", files["bin/ftprobe"])
	assert.Equal(t, "test-binary", files["tests/x.test"])
	var s guest.Spec
	require.NoError(t, json.Unmarshal([]byte(files["etc/ftprobe/guest.json"]), &s))
	assert.Equal(t, []string{"/bin/ftprobe", "version"}, s.Argv)
	assert.Contains(t, s.Env, "A=b")
	assert.Contains(t, s.Env, "FTPROBE_LAB=1")

	bad := c
	bad.Add = []string{"relative:path"}
	assert.ErrorContains(t, bad.buildInitramfs(out), "absolute guest path")
}

func TestQemuMissingNamesPackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Run(t.Context(), Config{Kernel: &Kernel{Arch: "arm64", Image: "x"}})
	assert.EqualError(t, err, "qemu-system-aarch64 not found: install it with `apt-get install qemu-system-arm`")
}
