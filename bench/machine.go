package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// machine is what the figures were measured on.
type machine struct {
	cpus      int
	model     string
	goVersion string
	libp2p    string
	mcp       string
	kernel    string
	load      string // /proc/loadavg at the start: the machine is shared
	dir       string // where the daemons' homes are, and its file system
	fsType    string
	fds       uint64 // the file descriptor limit, raised to the hard limit
	fdHard    uint64
	date      time.Time // when the run started
}

func describeMachine(dir string) machine {
	m := machine{cpus: runtime.NumCPU(), goVersion: runtime.Version(), dir: dir, date: time.Now(),
		model: "unknown", libp2p: "unknown", mcp: "unknown", kernel: "unknown", load: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
			switch d.Path {
			case "github.com/libp2p/go-libp2p":
				m.libp2p = v
			case "github.com/modelcontextprotocol/go-sdk":
				m.mcp = v
			}
		}
	}
	m.fsType = fsType(dir)
	return m
}

func (m machine) oneLine() string {
	return fmt.Sprintf("%d × %s, %s, go-libp2p %s, load %s", m.cpus, m.model, m.goVersion, m.libp2p, m.load)
}

func (m machine) print(w io.Writer) {
	fmt.Fprintf(w, "machine:   %d CPUs (nproc), %s; Linux %s; load average at start %s; %s\n", m.cpus, m.model, m.kernel, m.load, m.date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "software:  %s, go-libp2p %s, MCP Go SDK %s\n", m.goVersion, m.libp2p, m.mcp)
	fmt.Fprintf(w, "homes:     %s (%s): the daemons' audit logs and stores, and their fsyncs, are there\n", m.dir, m.fsType)
	fmt.Fprintf(w, "limits:    %d file descriptors per process (hard limit %d)\n", m.fds, m.fdHard)
	fmt.Fprintf(w, "network:   loopback (127.0.0.1) only; all parties on this machine, sharing its cores\n")
}

// fsType names the file system dir is on (the cost of an fsync depends
// on it more than on anything else).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	names := map[int64]string{0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "xfs", 0x9123683E: "btrfs",
		0x794c7630: "overlayfs", 0x6969: "nfs", 0x2FC12FC1: "zfs"}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

// fdLimit is a process's file descriptor limit: soft (cur) and hard.
type fdLimit struct{ cur, hard uint64 }

// raiseFDLimit lifts the soft file descriptor limit (RLIMIT_NOFILE) to
// the hard one: thousands of connections need thousands of descriptors.
// (Go does this at start-up too; doing it here makes it explicit and
// reportable.) The hard limit is as far as an unprivileged process may
// go; a shortfall is reported beside the rows it limits.
func raiseFDLimit() (fdLimit, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fdLimit{}, fmt.Errorf("reading the file descriptor limit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return fdLimit{}, fmt.Errorf("raising the file descriptor limit to %d: %w", l.Max, err)
		}
	}
	return fdLimit{cur: l.Cur, hard: l.Max}, nil
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() (int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), nil
}

// rssOf reads a process's resident set size (VmRSS) in bytes.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading VmRSS: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("reading VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("reading VmRSS: no VmRSS line in /proc/%d/status", pid)
}
