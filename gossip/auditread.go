package gossip

import (
	"fmt"
	"os"
)

// ReadAuditLog opens the audit log in dir for reading only, as a program
// that is not the daemon reads it (`ifaced audit` on the home of a
// stopped daemon): Entries, Decided and Conversations read the day files
// as they are on disk; nothing is created, measured, repaired or written,
// and Record fails with ErrAuditLogClosed. A .md file a crash left behind
// its .jsonl is read as it is (the daemon completes it at its next
// start); the .jsonl lines these methods read are the record.
func ReadAuditLog(dir string) (*AuditLog, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("reading audit log: %s is not a directory", dir)
	}
	return &AuditLog{dir: dir, closed: true, files: map[string]*auditFile{}, names: map[string]string{}}, nil
}
