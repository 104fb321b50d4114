// Package image checks ftprobe's container images as `make image` exports
// them, dist/ftprobe-VERSION-{amd64,arm64}.oci.tar: the OCI configuration
// (entrypoint, labels, architecture), a layer that holds the static binary
// and nothing else, the arm64 binary taken out of its image running
// `features` and `trace` in the arm64 7.3 lab VM, and the documented exit
// codes without privilege or tracefs.
//
// It runs when FTPROBE_IMAGE_DIR names the folder of the archives, with
// FTPROBE_IMAGE_VERSION and FTPROBE_IMAGE_REVISION (`make image-test` sets
// all three). Under CI=true a missing archive or lab prerequisite fails
// instead of skipping.
package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftprobe/ftprobe/internal/lab"
)

// Media types of the OCI image spec (v1.1) that an archive may use.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaLayerTar = "application/vnd.oci.image.layer.v1.tar"
	refNameKey    = "org.opencontainers.image.ref.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ociImage is one image read from an OCI archive.
type ociImage struct {
	RefName  string
	Manifest manifest
	Config   imageConfig
	Files    []*tar.Header // every entry of every layer
	Binary   []byte        // /ftprobe from the layer
}

// want is what `make image` was asked to build.
type want struct {
	dir, version, revision string
}

func required(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

func images(t *testing.T) want {
	t.Helper()
	w := want{os.Getenv("FTPROBE_IMAGE_DIR"), os.Getenv("FTPROBE_IMAGE_VERSION"), os.Getenv("FTPROBE_IMAGE_REVISION")}
	if w.dir == "" {
		required(t, "FTPROBE_IMAGE_DIR is not set: run `make image-test` to build the images and check them")
	}
	if w.version == "" || w.revision == "" {
		t.Fatal("FTPROBE_IMAGE_DIR is set without FTPROBE_IMAGE_VERSION and FTPROBE_IMAGE_REVISION: run `make image-test`")
	}
	return w
}

func (w want) archive(arch string) string {
	return filepath.Join(w.dir, fmt.Sprintf("ftprobe-%s-%s.oci.tar", w.version, arch))
}

// ociBlobs are an archive's blobs by digest ("sha256:HEX").
type ociBlobs map[string][]byte

// readOCIArchive reads the files of an OCI image layout archive: its
// oci-layout and index.json, and its blobs, each checked against the
// SHA-256 of its name; any other file is an error.
func readOCIArchive(path string) (layout, idx []byte, blobs ociBlobs, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	blobs = ociBlobs{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag == tar.TypeDir {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read %s: %s: %w", path, name, err)
		}
		switch {
		case name == "oci-layout":
			layout = b
		case name == "index.json":
			idx = b
		case strings.HasPrefix(name, "blobs/sha256/"):
			d := strings.TrimPrefix(name, "blobs/sha256/")
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != d {
				return nil, nil, nil, fmt.Errorf("blob %s: content has sha256 %x", d, sum)
			}
			blobs["sha256:"+d] = b
		case name == "manifest.json" || name == "repositories":
			// Docker's legacy metadata beside the OCI layout (docker save).
		default:
			return nil, nil, nil, fmt.Errorf("unexpected file %s in the archive", name)
		}
	}
	return layout, idx, blobs, nil
}

// blob returns the blob that d describes, checking its size, and unless
// into is nil decodes its JSON into it.
func (blobs ociBlobs) blob(d descriptor, into any) ([]byte, error) {
	b, ok := blobs[d.Digest]
	if !ok {
		return nil, fmt.Errorf("blob %s (%s) not in the archive", d.Digest, d.MediaType)
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
		}
	}
	return b, nil
}

// readOCILayer reads layer l of img, whose uncompressed SHA-256 must be
// diffID: it appends the layer's entries to img.Files and takes /ftprobe
// into img.Binary.
func readOCILayer(img *ociImage, blobs ociBlobs, l descriptor, diffID string) error {
	b, err := blobs.blob(l, nil)
	if err != nil {
		return err
	}
	var r io.Reader = bytes.NewReader(b)
	switch l.MediaType {
	case mediaLayerGz:
		if r, err = gzip.NewReader(r); err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	case mediaLayerTar:
	default:
		return fmt.Errorf("layer %s of media type %q", l.Digest, l.MediaType)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != diffID {
		return fmt.Errorf("layer %s: uncompressed sha256 %x, config diff_id %s", l.Digest, sum, diffID)
	}
	lt := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := lt.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		img.Files = append(img.Files, h)
		if strings.TrimPrefix(h.Name, "./") == "ftprobe" || h.Name == "/ftprobe" {
			if img.Binary, err = io.ReadAll(lt); err != nil {
				return fmt.Errorf("layer %s: ftprobe: %w", l.Digest, err)
			}
		}
	}
	return nil
}

// readOCI reads an OCI image layout archive: it checks that it holds only
// oci-layout, index.json and blobs whose SHA-256 matches their name, then
// follows index.json (through a nested index, as `docker save` may write)
// to the one image manifest, its config and its layers.
func readOCI(path string) (*ociImage, error) {
	layout, idx, blobs, err := readOCIArchive(path)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(layout, []byte(`"imageLayoutVersion"`)) {
		return nil, fmt.Errorf("oci-layout missing or without imageLayoutVersion: %q", layout)
	}
	var ix index
	if err := json.Unmarshal(idx, &ix); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	img := &ociImage{}
	for depth := 0; ; depth++ {
		if ix.SchemaVersion != 2 || len(ix.Manifests) != 1 {
			return nil, fmt.Errorf("index: schemaVersion %d with %d manifests, want 2 with one", ix.SchemaVersion, len(ix.Manifests))
		}
		d := ix.Manifests[0]
		if n := d.Annotations[refNameKey]; n != "" {
			img.RefName = n
		}
		if d.MediaType == mediaManifest {
			if _, err := blobs.blob(d, &img.Manifest); err != nil {
				return nil, err
			}
			break
		}
		if d.MediaType != mediaIndex || depth > 2 {
			return nil, fmt.Errorf("index entry of media type %q", d.MediaType)
		}
		if _, err := blobs.blob(d, &ix); err != nil {
			return nil, err
		}
	}
	if img.Manifest.Config.MediaType != mediaConfig {
		return nil, fmt.Errorf("config media type %q", img.Manifest.Config.MediaType)
	}
	if _, err := blobs.blob(img.Manifest.Config, &img.Config); err != nil {
		return nil, err
	}
	if len(img.Manifest.Layers) != len(img.Config.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%d layers, %d diff_ids", len(img.Manifest.Layers), len(img.Config.RootFS.DiffIDs))
	}
	for i, l := range img.Manifest.Layers {
		if err := readOCILayer(img, blobs, l, img.Config.RootFS.DiffIDs[i]); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// TestImageConfig checks both images' configuration and contents.
func TestImageConfig(t *testing.T) {
	w := images(t)
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			img, err := readOCI(w.archive(arch))
			require.NoError(t, err)
			assert.Equal(t, "ftprobe:"+w.version+"-"+arch, img.RefName, "reference name of the archive")
			c := img.Config
			assert.Equal(t, arch, c.Architecture)
			assert.Equal(t, "linux", c.OS)
			assert.Equal(t, []string{"/ftprobe"}, c.Config.Entrypoint)
			assert.Equal(t, []string{"features"}, c.Config.Cmd)
			assert.Equal(t, w.version, c.Config.Labels["org.opencontainers.image.version"])
			assert.Equal(t, w.revision, c.Config.Labels["org.opencontainers.image.revision"])
			assert.Equal(t, "ftprobe", c.Config.Labels["org.opencontainers.image.title"])
			assert.NotEmpty(t, c.Config.Labels["org.opencontainers.image.source"])
			assert.Equal(t, "layers", c.RootFS.Type)

			// One layer holding one file: the binary, executable, owned by root.
			require.Len(t, img.Manifest.Layers, 1, "FROM scratch plus COPY gives one layer")
			var names []string
			for _, h := range img.Files {
				names = append(names, h.Name)
			}
			require.Equal(t, []string{"ftprobe"}, names, "the layer holds only the binary")
			h := img.Files[0]
			assert.Equal(t, byte(tar.TypeReg), h.Typeflag)
			assert.Equal(t, int64(0o755), h.Mode&0o7777)
			assert.Equal(t, 0, h.Uid)
			assert.Equal(t, 0, h.Gid)

			// The binary is dist's, for this architecture, static.
			dist, err := os.ReadFile(filepath.Join(w.dir, "ftprobe-linux-"+arch))
			require.NoError(t, err)
			assert.Equal(t, sha256.Sum256(dist), sha256.Sum256(img.Binary), "the image's /ftprobe is dist/ftprobe-linux-%s", arch)
			sums, err := os.ReadFile(filepath.Join(w.dir, "SHA256SUMS"))
			require.NoError(t, err)
			sum := sha256.Sum256(img.Binary)
			assert.Contains(t, string(sums), hex.EncodeToString(sum[:])+"  ftprobe-linux-"+arch+"\n")
			ef, err := elf.NewFile(bytes.NewReader(img.Binary))
			require.NoError(t, err)
			assert.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch], ef.Machine)
			for _, p := range ef.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "static binary: no program interpreter")
			}
			assert.True(t, bytes.Contains(img.Binary, []byte(w.revision)), "revision %s linked in", w.revision)

			// Both BPF objects of the architecture are embedded byte for byte.
			obj := map[string]string{"amd64": "x86", "arm64": "arm64"}[arch]
			for _, n := range []string{"trace", "bench"} {
				o, err := os.ReadFile(filepath.Join("..", "..", "internal", "bpfobj", n+"_"+obj+"_bpfel.o"))
				require.NoError(t, err)
				assert.True(t, bytes.Contains(img.Binary, o), "%s_%s_bpfel.o embedded", n, obj)
			}
		})
	}
}

// extract writes the image's binary to an executable file in a directory
// that any user can read.
func extract(t *testing.T, w want, arch string) string {
	t.Helper()
	img, err := readOCI(w.archive(arch))
	require.NoError(t, err)
	require.NotEmpty(t, img.Binary, "no /ftprobe in the %s image", arch)
	dir := publicDir(t)
	bin := filepath.Join(dir, "ftprobe")
	require.NoError(t, os.WriteFile(bin, img.Binary, 0o755))
	return bin
}

// publicDir returns a new directory that nobody can read and search (the
// parents of t.TempDir are 0700), removed when the test ends.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ftprobe-image-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// TestImageVersion runs the host-architecture binary from its image:
// `ftprobe version` names the version, revision, Go version and the
// SHA-256 of each embedded BPF object.
func TestImageVersion(t *testing.T) {
	w := images(t)
	bin := extract(t, w, runtime.GOARCH)
	out, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, fmt.Sprintf("ftprobe %s (revision %s, %s, linux/%s)\n", w.version, w.revision, runtime.Version(), runtime.GOARCH))
	obj := map[string]string{"amd64": "x86", "arm64": "arm64"}[runtime.GOARCH]
	for _, n := range []string{"bench", "trace", "tracelean", "tracefilter", "tracestat"} {
		o, err := os.ReadFile(filepath.Join("..", "..", "internal", "bpfobj", n+"_"+obj+"_bpfel.o"))
		require.NoError(t, err)
		sum := sha256.Sum256(o)
		assert.Contains(t, s, fmt.Sprintf("bpf object %s.bpf.o sha256 %x\n", n, sum))
	}
}

// run runs cmd and returns its exit code, stdout and stderr.
func run(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestImageWithoutPrivilege runs the image's binary as a container without
// --privileged would: as nobody with no capabilities (setpriv), and as root
// without tracefs (a private mount namespace). It checks the documented
// exit codes and that the message names what is missing.
func TestImageWithoutPrivilege(t *testing.T) {
	w := images(t)
	if os.Geteuid() != 0 {
		required(t, "needs root to drop to nobody and to unshare the mount namespace (uid %d)", os.Geteuid())
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		required(t, "setpriv (util-linux) not found")
	}
	bin := extract(t, w, runtime.GOARCH)
	dir := filepath.Dir(bin)
	nobody := func(args ...string) *exec.Cmd {
		c := exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", bin}, args...)...)
		c.Dir = dir
		return c
	}
	const missing = "missing privilege: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), has none of them; run as root, or the container with --privileged"
	for _, args := range [][]string{
		{"features"},
		{"features", "--json"},
		{"trace", "do_sys_openat2", "--duration", "1s"},
		{"trace", "do_sys_openat2", "--", "/bin/true"},
		{"compare", "-q", "--runs", "1"},
	} {
		code, stdout, stderr := run(t, nobody(args...))
		assert.Equal(t, 2, code, "%v as nobody: stderr %s", args, stderr)
		assert.Contains(t, stderr, "ftprobe: "+args[0]+": "+missing, args)
		if args[0] == "features" {
			// The report is still printed, with the reason per mode.
			assert.Contains(t, stdout, "permission denied: needs CAP_BPF and CAP_PERFMON", args)
		}
		if !strings.Contains(readMounts(t), " /sys/kernel/tracing tracefs ") {
			assert.Contains(t, stderr, "tracefs is not mounted either (mount -t tracefs tracefs /sys/kernel/tracing, or -v /sys/kernel/tracing:/sys/kernel/tracing for a container)", args)
		}
	}
	// compare --from renders a saved report: no privilege needed.
	report, err := os.ReadFile("../../docs/bench/compare-arm64-7.3.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "compare.json"), report, 0o644))
	code, stdout, stderr := run(t, nobody("compare", "--from", "compare.json"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "7.3.4+deb13-arm64", "the saved report's kernel")
	// Merging runners' reports with a verdict against a baseline (the CI
	// example's last job): no privilege either. The report against itself
	// as the baseline regresses nowhere.
	report, err = os.ReadFile("../../docs/bench/compare-amd64-7.3.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "amd64.json"), report, 0o644))
	code, stdout, stderr = run(t, nobody("compare", "--from", "compare.json", "--from", "amd64.json", "--baseline", "compare.json"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "7.3.4+deb13-arm64 arm64 icount", "the merged table's arm64 column")
	assert.Contains(t, stdout, "7.3.4+deb13-amd64 amd64 icount", "the merged table's amd64 column")

	// Root, but tracefs not mounted: unsupported (3), with the mount command.
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		required(t, "unshare (util-linux) not found")
	}
	for _, args := range [][]string{{"trace", "do_sys_openat2", "--duration", "1s"}, {"compare", "-q", "--runs", "1"}} {
		cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`umount -l /sys/kernel/tracing 2>/dev/null; exec "$@"`, "sh", bin}, args...)...)
		code, _, stderr := run(t, cmd)
		assert.Equal(t, 3, code, "%v as root without tracefs: stderr %s", args, stderr)
		assert.Contains(t, stderr, "ftprobe: tracefs is not mounted at /sys/kernel/tracing (mount it: mount -t tracefs tracefs /sys/kernel/tracing)", args)
	}
}

func readMounts(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	return string(b)
}

// TestImageArm64InLab boots Debian's arm64 7.3 kernel with the arm64 binary
// taken out of its image as the lab's ftprobe: `features` must prove
// fentry and kprobe.multi, and a short trace of do_sys_openat2 around
// `ftprobe workload open` must record the workload's calls.
func TestImageArm64InLab(t *testing.T) {
	w := images(t)
	if bin, pkg := lab.QemuBinary("arm64"); !hasCommand(bin) {
		required(t, "%s not found: ./scripts/setup.sh qemu installs %s", bin, pkg)
	}
	bin := extract(t, w, "arm64")
	ctx := context.Background()
	k, err := lab.ResolveDebian(ctx, "7.3", "arm64", os.Stderr)
	require.NoError(t, err)
	boot := func(args ...string) (string, *lab.Result) {
		t.Helper()
		var out bytes.Buffer
		res, err := lab.Run(ctx, lab.Config{Kernel: k, Binary: bin, Args: args, Timeout: 8 * time.Minute,
			Stdout: io.MultiWriter(&out, testWriter{t}), Stderr: testWriter{t}})
		require.NoError(t, err, "ftprobe %v on %s", args, k)
		t.Logf("%s on %s (%s): exit %d, boot to command %.1fs, total %.1fs", args[0], res.Release, res.Accel, res.ExitStatus, res.Boot.Seconds(), res.Total.Seconds())
		assert.True(t, strings.HasPrefix(res.Release, "7.3.") && strings.HasSuffix(res.Release, "-arm64"), "guest release %s", res.Release)
		return out.String(), res
	}

	t.Run("features", func(t *testing.T) {
		out, res := boot("features", "--json")
		require.Equal(t, 0, res.ExitStatus, out)
		var r struct {
			Release string
			Arch    string
			Paths   []struct {
				Path   string
				Works  bool
				Reason string
			}
		}
		require.NoError(t, json.Unmarshal([]byte(jsonDocument(out)), &r), out)
		assert.Equal(t, res.Release, r.Release)
		assert.Equal(t, "arm64", r.Arch)
		works := map[string]bool{}
		for _, m := range r.Paths {
			works[m.Path] = m.Works
			assert.True(t, m.Works || m.Reason != "", "%s fails without a reason", m.Path)
		}
		for _, m := range []string{"fentry", "fexit", "kprobe.multi", "kretprobe.multi"} {
			assert.True(t, works[m], "%s works on arm64 7.3", m)
		}
	})

	t.Run("trace", func(t *testing.T) {
		out, res := boot("trace", "--output", "json", "do_sys_openat2", "--", "/bin/ftprobe", "workload", "open", "--count", "3")
		require.Equal(t, 0, res.ExitStatus, "trace passes the workload's status through")
		assertArm64Trace(t, out)
	})
}

// traceEvent is the part of a JSON line of `ftprobe trace` (an event or
// the summary) that TestImageArm64InLab asserts.
type traceEvent struct {
	Type       string         `json:"type"`
	Func       string         `json:"func"`
	Mode       string         `json:"mode"`
	TGID       uint32         `json:"tgid"`
	Args       map[string]any `json:"args"`
	Ret        int64          `json:"ret"`
	DurationNS uint64         `json:"duration_ns"`
	Events     uint64         `json:"events"`
	Entries    uint64         `json:"entries"`
	Exits      uint64         `json:"exits"`
}

// assertArm64Trace asserts the console output of a trace of do_sys_openat2
// around `ftprobe workload open --count 3` in the arm64 7.3 guest: the
// workload's calls in fsession mode, each returned, and the summary's
// counts.
func assertArm64Trace(t *testing.T, out string) {
	t.Helper()
	var entries, exits, fds int
	var summary *traceEvent
	tgids := map[uint32]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		var ev traceEvent
		if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &ev) != nil {
			continue // console lines
		}
		switch ev.Type {
		case "entry", "exit":
			assert.Equal(t, "do_sys_openat2", ev.Func)
			assert.Equal(t, "fsession", ev.Mode, "auto picks fsession on arm64 7.3 (the tracing multi links are refused there)")
			tgids[ev.TGID] = true
			require.NotEmpty(t, ev.Args)
			assert.Equal(t, -100.0, ev.Args["dfd"], "dfd = AT_FDCWD, typed from BTF")
			if ev.Type == "entry" {
				entries++
				continue
			}
			exits++
			assert.NotZero(t, ev.DurationNS)
			if ev.Ret >= 3 {
				fds++
			}
		case "summary":
			summary = &ev
		}
	}
	// The workload's 3 opens return fds; its Go runtime may open
	// (or fail to open) a few files more at start.
	assert.GreaterOrEqual(t, fds, 3, "exits returning an fd")
	assert.Equal(t, entries, exits, "every traced call returned")
	assert.Len(t, tgids, 1, "only the workload process is traced")
	require.NotNil(t, summary, "summary line")
	assert.Equal(t, "fsession", summary.Mode)
	assert.Equal(t, uint64(entries+exits), summary.Events)
	assert.Equal(t, uint64(entries), summary.Entries)
}

// jsonDocument returns the indented JSON document in console output: from
// the first line that is "{" to the next line that is "}".
func jsonDocument(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.TrimRight(l, "\r") != "{" {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimRight(lines[j], "\r") == "}" {
				return strings.Join(lines[i:j+1], "\n")
			}
		}
	}
	return ""
}

func hasCommand(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// testWriter sends the guest's console to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
