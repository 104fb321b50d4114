package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// DebianModule returns the host path of the kernel module name ("tun") of
// kernel k, uncompressed, so that a lab test can load it with
// finit_module. It comes from Debian's linux-modules-RELEASE package of
// exactly k's package version (a module of any other build is refused by
// the kernel's vermagic check), is downloaded once (SHA-256 checked
// against the apt metadata, like the kernels), and only the module is kept
// in the cache: CacheDir()/modules/v1/ARCH/PACKAGE_VERSION/NAME.ko.
func DebianModule(ctx context.Context, k *Kernel, name string, log io.Writer) (string, error) {
	if k.Release == "" || k.PkgVer == "" {
		return "", fmt.Errorf("module %s for %s: kernel has no Debian release and package version (resolve it with debian:VERSION)", name, k)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	pkg := "linux-modules-" + k.Release
	dst := filepath.Join(cache, "modules", "v1", k.Arch, pkg+"_"+k.PkgVer, name+".ko")
	if _, err := os.Stat(dst); err == nil {
		return dst, nil // written by rename: present means complete
	}
	apt, err := newAptEnv(cache, k.Arch)
	if err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	if err := apt.update(ctx, log, 24*time.Hour); err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	// pkg=version: the kernel's own build, even when the archive has a
	// newer one of the same release name.
	ps, err := apt.show(ctx, pkg+"="+k.PkgVer)
	if err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	if len(ps) == 0 {
		return "", fmt.Errorf("module %s: package %s version %s not in the apt metadata of %s", name, pkg, k.PkgVer, apt.uri)
	}
	p := ps[0]
	deb := filepath.Join(cache, "debs", filepath.Base(p.Filename))
	if err := download(ctx, apt.uri+"/"+p.Filename, deb, p.SHA256, p.Size, log); err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	fmt.Fprintf(log, "ftprobe: extracting %s.ko from %s\n", name, filepath.Base(deb))
	ko, err := moduleFromDeb(ctx, deb, name)
	if err != nil {
		return "", fmt.Errorf("module %s from %s: %w", name, filepath.Base(deb), err)
	}
	if err := checkVermagic(ko, k.Release); err != nil {
		return "", fmt.Errorf("module %s from %s: %w", name, filepath.Base(deb), err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("module cache: %w", err)
	}
	if err := os.WriteFile(dst+".tmp", ko, 0o644); err != nil {
		return "", fmt.Errorf("module cache: %w", err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		return "", fmt.Errorf("module cache: %w", err)
	}
	os.Remove(deb) // about 100 MB; the module is what is kept
	return dst, nil
}

// moduleFromDeb reads the data archive of a .deb (dpkg-deb --fsys-tarfile)
// and returns module name, uncompressed.
func moduleFromDeb(ctx context.Context, deb, name string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpkg-deb: %w", err)
	}
	ko, ferr := moduleFromTar(ctx, out, name)
	io.Copy(io.Discard, out) // let dpkg-deb finish writing
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile: %w: %s", err, lastLines(stderr.String(), 3))
	}
	return ko, ferr
}

// moduleFromTar finds NAME.ko, NAME.ko.xz or NAME.ko.zst under a
// lib/modules/RELEASE/kernel/ directory of the tar stream and returns it
// uncompressed (xz -d or zstd -d: the host tools, as dpkg-deb is).
func moduleFromTar(ctx context.Context, r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s.ko[.xz|.zst] under lib/modules/*/kernel/", name)
		}
		if err != nil {
			return nil, fmt.Errorf("read package archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !strings.Contains(h.Name, "/kernel/") {
			continue
		}
		var tool string
		switch path.Base(h.Name) {
		case name + ".ko":
		case name + ".ko.xz":
			tool = "xz"
		case name + ".ko.zst":
			tool = "zstd"
		default:
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h.Name, err)
		}
		if tool == "" {
			return b, nil
		}
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is compressed and the host has no %s to decompress it: %w", h.Name, tool, err)
		}
		c := exec.CommandContext(ctx, tool, "-dc")
		c.Stdin = bytes.NewReader(b)
		var out, stderr bytes.Buffer
		c.Stdout, c.Stderr = &out, &stderr
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("%s -dc %s: %w: %s", tool, h.Name, err, lastLines(stderr.String(), 3))
		}
		return out.Bytes(), nil
	}
}

// checkVermagic checks that the module ELF was built for release: its
// .modinfo "vermagic=RELEASE ..." string is what the kernel compares at
// load, so a mismatch found here is one the guest would report as a bare
// EINVAL.
func checkVermagic(ko []byte, release string) error {
	if !bytes.HasPrefix(ko, []byte("\x7fELF")) {
		return errors.New("not an ELF file")
	}
	i := bytes.Index(ko, []byte("\x00vermagic="))
	if i < 0 {
		return errors.New("no vermagic in .modinfo")
	}
	v := ko[i+len("\x00vermagic="):]
	if j := bytes.IndexByte(v, 0); j >= 0 {
		v = v[:j]
	}
	if f := strings.Fields(string(v)); len(f) == 0 || f[0] != release {
		return fmt.Errorf("vermagic %q is not for kernel %s", v, release)
	}
	return nil
}
