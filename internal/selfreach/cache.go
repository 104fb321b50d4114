package selfreach

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/ftprobe/ftprobe/internal/bpfobj"
	"github.com/ftprobe/ftprobe/internal/symbols"
)

// Refused is the verdict kept for a candidate the kernel refused the
// counting program on: not known to be reached, not checked again.
const Refused = -1.0

// Cache keeps Learn's verdicts for the rest of the boot, one file per
// settings key in Dir/selfreach (0700; files 0600, written by rename): a
// later process checks only the functions not in it. A file holds the
// boot it was learned on and the hash of ftprobe's embedded BPF objects,
// so another boot or another ftprobe build never reuses it; a corrupt or
// foreign file reads as empty and is replaced at the next Store. The zero
// Cache (Dir "") keeps nothing.
type Cache struct {
	Dir     string
	Boot    string
	Objects string
}

// OpenCache is the Cache in dir of the running boot and of this binary's
// BPF objects; the zero Cache when dir is "" or the boot id unreadable.
func OpenCache(dir string) Cache {
	if dir == "" {
		return Cache{}
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return Cache{}
	}
	return Cache{Dir: dir, Boot: string(bytes.TrimSpace(b)), Objects: objectsHash()}
}

// objectsHash hashes the hashes of the embedded BPF objects (the trace
// programs and the driver).
func objectsHash() string {
	objs := bpfobj.Objects()
	names := make([]string, 0, len(objs))
	for n := range objs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s\n", n, objs[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CacheName is how the cache names f: its name and address (stable within
// a boot; a reloaded module's function at another address is checked
// again).
func CacheName(f *symbols.Func) string {
	return fmt.Sprintf("%s@%#x", f.Name, f.Addr)
}

// cacheFile is the content of one file.
type cacheFile struct {
	Boot     string             `json:"boot_id"`
	Objects  string             `json:"objects"`
	Settings string             `json:"settings"`
	Funcs    map[string]float64 `json:"funcs"`
}

func (c Cache) path(settings string) string {
	h := sha256.Sum256([]byte(c.Objects + "\n" + settings))
	return filepath.Join(c.Dir, "selfreach", hex.EncodeToString(h[:])[:24]+".json")
}

// Load returns the verdicts kept for settings, by CacheName: how many
// times per traced call the trace programs call the function (0: not at
// all; Refused). Nil when there are none.
func (c Cache) Load(settings string) map[string]float64 {
	if c.Dir == "" {
		return nil
	}
	b, err := os.ReadFile(c.path(settings))
	if err != nil {
		return nil
	}
	var f cacheFile
	if json.Unmarshal(b, &f) != nil || f.Boot != c.Boot || f.Objects != c.Objects || f.Settings != settings {
		return nil
	}
	return f.Funcs
}

// Store merges verdicts into the file of settings (with what another
// process stored meanwhile). Best effort: an error costs only a later
// start's check.
func (c Cache) Store(settings string, verdicts map[string]float64) error {
	if c.Dir == "" || len(verdicts) == 0 {
		return nil
	}
	f := cacheFile{Boot: c.Boot, Objects: c.Objects, Settings: settings, Funcs: map[string]float64{}}
	for n, v := range c.Load(settings) {
		f.Funcs[n] = v
	}
	for n, v := range verdicts {
		f.Funcs[n] = v
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	p := c.path(settings)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	t, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = t.Write(b)
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(t.Name(), p)
	}
	if err != nil {
		os.Remove(t.Name())
	}
	return err
}
