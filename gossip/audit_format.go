package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// AuditFormat is the layout of the audit log directory this package reads
// and writes: the day directories, their .jsonl and .md files and the
// tamper-evident tree files, as the comment at the top of audit.go and
// docs/audit.md describe them. A log without the file _format.json in its
// directory is format 1, the layout of v0.1.0 and of this package, which
// therefore writes no such file. A later layout (say, views stored once
// and referred to by hash) raises the number, writes {"format": N} there,
// and converts or reads the older one; OpenAuditLog and VerifyAuditLog
// refuse a log of a newer format than they read rather than misread it or
// write into it in the older layout (ErrAuditFormat).
const AuditFormat = 1

// auditFormatName is the format file in the log's directory. It holds no
// '-' and is no day, so nothing that lists days sees it (ifaced v0.1.0
// included).
const auditFormatName = "_format.json"

// ErrAuditFormat: the audit log was written in a layout this package does
// not read (a newer ifaced's).
var ErrAuditFormat = errors.New("unknown audit log format")

type auditFormatFile struct {
	Format int `json:"format"`
}

// readAuditFormat reads dir's format: AuditFormat when the file is
// absent; an error wrapping ErrAuditFormat when it is newer than this
// package reads or does not parse.
func readAuditFormat(dir string) (int, error) {
	path := filepath.Join(dir, auditFormatName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return AuditFormat, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	var f auditFormatFile
	if err := json.Unmarshal(b, &f); err != nil || f.Format < 1 {
		return 0, fmt.Errorf("%w: %s holds %q, not {\"format\": N}; this ifaced reads format %d", ErrAuditFormat, path, b, AuditFormat)
	}
	if f.Format > AuditFormat {
		return 0, fmt.Errorf("%w: the audit log %s was written by a newer ifaced (found format %d; this ifaced reads format %d), and this one would misread it or write into it in the older layout. "+
			"Run that newer ifaced (or a later one) on this data directory; or, to go back to this version, move %s aside (the newer ifaced still reads it) and let this one start a new log (docs/upgrading.md)",
			ErrAuditFormat, dir, f.Format, AuditFormat, dir)
	}
	return f.Format, nil
}
