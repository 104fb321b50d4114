package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeModule is enough of a module ELF for checkVermagic: the ELF magic
// and a .modinfo string.
func fakeModule(vermagic string) []byte {
	return []byte("\x7fELF\x02\x01\x01\x00name=tun\x00vermagic=" + vermagic + "\x00depends=\x00")
}

func tarOf(t *testing.T, files map[string][]byte, order ...string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, n := range order {
		require.NoError(t, w.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := w.Write(files[n])
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return &buf
}

// TestModuleFromTar: the module is found by name under kernel/ (not a
// same-named file elsewhere, not tunnel4.ko), plain or xz-compressed, and
// a package without it is an error naming the module.
func TestModuleFromTar(t *testing.T) {
	ko := fakeModule("7.3.4+deb13-arm64 SMP preempt mod_unload aarch64")
	other := fakeModule("other")
	plain := tarOf(t, map[string][]byte{
		"./usr/share/doc/tun.ko": other,
		"./usr/lib/modules/7.3.4+deb13-arm64/kernel/net/ipv4/tunnel4.ko": other,
		"./usr/lib/modules/7.3.4+deb13-arm64/kernel/drivers/net/tun.ko":  ko,
	}, "./usr/share/doc/tun.ko", "./usr/lib/modules/7.3.4+deb13-arm64/kernel/net/ipv4/tunnel4.ko", "./usr/lib/modules/7.3.4+deb13-arm64/kernel/drivers/net/tun.ko")
	got, err := moduleFromTar(context.Background(), plain, "tun")
	require.NoError(t, err)
	assert.Equal(t, ko, got)

	// xz is what Debian compresses modules with (CONFIG_MODULE_COMPRESS_XZ);
	// the lab host has it (dpkg's data archives need it too).
	c := exec.Command("xz", "-c")
	c.Stdin = bytes.NewReader(ko)
	xz, err := c.Output()
	require.NoError(t, err, "xz")
	got, err = moduleFromTar(context.Background(), tarOf(t, map[string][]byte{"./usr/lib/modules/r/kernel/drivers/net/tun.ko.xz": xz}, "./usr/lib/modules/r/kernel/drivers/net/tun.ko.xz"), "tun")
	require.NoError(t, err)
	assert.Equal(t, ko, got)

	_, err = moduleFromTar(context.Background(), tarOf(t, map[string][]byte{"./usr/lib/modules/r/kernel/x.ko": other}, "./usr/lib/modules/r/kernel/x.ko"), "tun")
	assert.EqualError(t, err, "no tun.ko[.xz|.zst] under lib/modules/*/kernel/")
}

// TestCheckVermagic: the release is the first word of vermagic, exactly
// (7.3.4+deb13-arm64 is not 7.3.4+deb13-arm64-16k).
func TestCheckVermagic(t *testing.T) {
	assert.NoError(t, checkVermagic(fakeModule("7.3.4+deb13-arm64 SMP preempt mod_unload aarch64"), "7.3.4+deb13-arm64"))
	assert.EqualError(t, checkVermagic(fakeModule("7.3.4+deb13-arm64-16k SMP preempt"), "7.3.4+deb13-arm64"),
		`vermagic "7.3.4+deb13-arm64-16k SMP preempt" is not for kernel 7.3.4+deb13-arm64`)
	assert.EqualError(t, checkVermagic([]byte("\x7fELFxx"), "r"), "no vermagic in .modinfo")
	assert.EqualError(t, checkVermagic([]byte("PK"), "r"), "not an ELF file")
}
