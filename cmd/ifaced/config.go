package main

import (
	"bytes"
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/google/renameio/v2"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// `ifaced config`: the effective configuration, and changing one key.
//
//	ifaced config [show] [--json]   config.toml over the defaults, as TOML (or JSON)
//	ifaced config keys              the keys `config set` takes, with their types
//	ifaced config set KEY VALUE     change one key in config.toml
//
// Decisions for `config set`:
//   - The keys and their types come from config.Config itself (its toml
//     tags, by reflection), so a key added there is settable here with no
//     table to keep; map keys are settable by naming the entry
//     (temperature.peers.PEER, disclosure.personas.PERSONA.PEER). Arrays of
//     tables (capabilities, tiers.custom) and the MCP overlays are edited
//     by hand.
//   - The file is edited as text, not re-encoded, so every comment and the
//     order of keys stay: go-toml's own parser (the unstable package of the
//     version already in go.mod) locates the key, and only its `key =
//     value` is replaced; a key not in the file is added at the end of its
//     table, or in a new table at the end.
//   - The edited text must load through config.ParseConfig, the daemon's own
//     loader, before anything is written; then it replaces config.toml
//     atomically (a new file, fsynced, renamed over the old one) with the
//     old file's mode. The running daemon reads it at its next start.

// configSubs are the subcommands of `config`.
var configSubs = []string{"show", "set", "keys"}

func runConfig(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "config", "[show | keys | set KEY VALUE]", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	sub := "show"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	switch {
	case !slices.Contains(configSubs, sub):
		msg := fmt.Sprintf("config %q: want show, keys or set KEY VALUE", sub)
		if s := suggest(sub, configSubs); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return usageError("%s", msg)
	case sub == "set" && len(pos) != 2:
		return usageError("config set takes KEY and VALUE (e.g. config set log.level debug; `ifaced config keys` lists the keys)")
	case sub != "set" && len(pos) > 0:
		return usageError("config %s takes no arguments, got %q", sub, pos)
	}
	if sub == "keys" {
		return printConfigKeys(e, f.json)
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	if sub == "set" {
		return configSet(e, f, h.ConfigPath(), pos[0], pos[1])
	}
	cfg, err := config.LoadConfig(h.ConfigPath())
	noFile := errors.Is(err, config.ErrNoConfig)
	if err != nil && !noFile {
		return configFailure(err)
	}
	body, err := toml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	if f.json {
		var v map[string]any
		if err := toml.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("encoding the configuration: %w", err)
		}
		return writeJSON(e.stdout, v)
	}
	if noFile {
		fmt.Fprintf(e.stdout, "# %s does not exist: these are the defaults (`ifaced init` writes them)\n", h.ConfigPath())
	} else {
		fmt.Fprintf(e.stdout, "# the effective configuration: %s over the defaults\n", h.ConfigPath())
	}
	_, err = e.stdout.Write(body)
	return err
}

// configFailure lists a config file's problems, one a line.
func configFailure(err error) error {
	var ce *config.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	var lines []string
	for _, p := range negotiate.Errors(ce.Err) {
		lines = append(lines, ce.File+": "+p.Error())
	}
	return &problemsError{summary: fmt.Sprintf("%s: %d problem(s)", ce.File, len(lines)), problems: lines}
}

// configKey is one key `config set` takes.
type configKey struct {
	Key  string `json:"key"`  // dotted; <NAME> marks a part the owner names
	Type string `json:"type"` // string, integer, boolean, duration, list of strings
	kind reflect.Type
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// configKeys lists the settable keys of config.Config.
func configKeys() []configKey {
	var out []configKey
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
			if name == "" || name == "-" || !sf.IsExported() {
				continue
			}
			key := prefix + name
			ft := sf.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
			}
			switch {
			case reflect.PointerTo(ft).Implements(textUnmarshaler):
				out = append(out, configKey{key, "duration", ft})
			case ft.Kind() == reflect.Struct:
				walk(key+".", ft)
			case ft.Kind() == reflect.String, ft.Kind() == reflect.Int, ft.Kind() == reflect.Bool:
				out = append(out, configKey{key, map[reflect.Kind]string{reflect.String: "string", reflect.Int: "integer", reflect.Bool: "boolean"}[ft.Kind()], ft})
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
				out = append(out, configKey{key, "list of strings", ft})
			case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && ft.Elem().Kind() == reflect.String:
				out = append(out, configKey{key + ".<NAME>", "string", ft.Elem()})
			case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && ft.Elem().Kind() == reflect.Map &&
				ft.Elem().Key().Kind() == reflect.String && ft.Elem().Elem().Kind() == reflect.String:
				out = append(out, configKey{key + ".<NAME>.<NAME>", "string", ft.Elem().Elem()})
			}
		}
	}
	walk("", reflect.TypeFor[config.Config]())
	return out
}

func printConfigKeys(e *env, asJSON bool) error {
	keys := configKeys()
	if asJSON {
		return writeJSON(e.stdout, map[string]any{"keys": keys})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTYPE")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k.Key, k.Type)
	}
	fmt.Fprintln(tw, "\n(<NAME> is yours to choose: temperature.peers.<NAME> is a peer's cap, disclosure.personas.<NAME>.<NAME> a persona's tier for a peer)")
	return tw.Flush()
}

// matchKey finds the settable key a dotted path names, and splits the
// path into its table and the key in that table.
func matchKey(parts []string) (configKey, bool) {
	for _, k := range configKeys() {
		kp := strings.Split(k.Key, ".")
		if len(kp) != len(parts) {
			continue
		}
		ok := true
		for i := range kp {
			if kp[i] != "<NAME>" && kp[i] != parts[i] {
				ok = false
				break
			}
		}
		if ok {
			return k, true
		}
	}
	return configKey{}, false
}

// splitKey splits a dotted key; a part may be quoted ("a.b") to hold dots.
func splitKey(key string) ([]string, error) {
	var parts []string
	for rest := key; ; {
		var part string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("%q: an unclosed quote", key)
			}
			part, rest = rest[1:1+end], rest[2+end:]
		} else {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				i = len(rest)
			}
			part, rest = rest[:i], rest[i:]
		}
		if part == "" {
			return nil, fmt.Errorf("%q: an empty part", key)
		}
		parts = append(parts, part)
		if rest == "" {
			return parts, nil
		}
		if !strings.HasPrefix(rest, ".") || rest == "." {
			return nil, fmt.Errorf("%q: parts are separated by dots", key)
		}
		rest = rest[1:]
	}
}

// tomlValue writes value as the TOML of the key's type.
func tomlValue(k configKey, value string) (string, error) {
	switch k.Type {
	case "integer":
		if _, err := strconv.Atoi(value); err != nil {
			return "", fmt.Errorf("%s: %q is not an integer (e.g. 100)", k.Key, value)
		}
		return value, nil
	case "boolean":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return "", fmt.Errorf("%s: %q is not a boolean (true or false)", k.Key, value)
		}
		return strconv.FormatBool(b), nil
	case "list of strings":
		if strings.HasPrefix(strings.TrimSpace(value), "[") {
			return value, nil // a TOML array already; the loader judges it
		}
		var quoted []string
		for _, s := range splitList(value) {
			quoted = append(quoted, tomlString(s))
		}
		return "[" + strings.Join(quoted, ", ") + "]", nil
	}
	return tomlString(value), nil
}

// tomlString writes s as a TOML basic string ("…"), the form the rest of
// a hand-written config.toml uses.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(part string) string {
	if bareKey.MatchString(part) {
		return part
	}
	return tomlString(part)
}

func configSet(e *env, f *flags, path, key, value string) error {
	parts, err := splitKey(key)
	if err != nil {
		return usageError("config set: %v", err)
	}
	k, ok := matchKey(parts)
	if !ok {
		var names []string
		for _, ck := range configKeys() {
			names = append(names, ck.Key)
		}
		msg := fmt.Sprintf("config set: %q is not a key config set takes", key)
		if s := suggest(key, names); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return usageError("%s (`ifaced config keys` lists them; capabilities and tiers.custom are edited in the file)", msg)
	}
	val, err := tomlValue(k, value)
	if err != nil {
		return usageError("config set %v", err)
	}
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s does not exist: run `ifaced init` first", path)
	}
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	edited, old, err := setTOMLKey(src, parts, val)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := config.ParseConfig(edited); err != nil {
		// Nothing is written: the daemon could not start on it. The
		// value given is what made it so: a command-line mistake.
		return &exitError{code: 2, err: configFailure(&config.ConfigError{File: path + " (as it would be)", Err: err})}
	}
	if err := writeFileAtomic(path, edited, st.Mode().Perm()); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	if f.json {
		return writeJSON(e.stdout, map[string]string{"file": path, "key": key, "value": val, "was": old})
	}
	if old == "" {
		fmt.Fprintf(e.stdout, "%s: set %s = %s (the default until now)\n", path, key, val)
	} else {
		fmt.Fprintf(e.stdout, "%s: set %s = %s (was %s)\n", path, key, val, old)
	}
	fmt.Fprintln(e.stdout, "a running daemon reads it at its next start")
	return nil
}

// setTOMLKey sets the key at path to val (TOML) in the document src,
// keeping everything else as written. It returns the edited document and
// the value it replaced ("" when the key was not in the file).
func setTOMLKey(src []byte, path []string, val string) ([]byte, string, error) {
	table, leaf := path[:len(path)-1], path[len(path)-1]
	p := unstable.Parser{}
	p.Reset(src)
	var current []string // the table the parser is in; nil in an array of tables
	inArray := false
	tableSeen := len(table) == 0
	insertAt := -1   // where a new key of the table goes: after its last line
	firstTable := -1 // the start of the first table header, for top-level keys
	lineEnd := func(off int) int {
		if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
			return off + i + 1
		}
		return len(src)
	}
	keyParts := func(n *unstable.Node) ([]string, int) {
		var parts []string
		end := 0
		for it := n.Key(); it.Next(); {
			k := it.Node()
			parts = append(parts, string(k.Data))
			end = int(k.Raw.Offset + k.Raw.Length)
		}
		return parts, end
	}
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, end := keyParts(n)
			if firstTable < 0 {
				firstTable = bytes.LastIndexByte(src[:end], '[')
				if n.Kind == unstable.ArrayTable {
					firstTable--
				}
			}
			current, inArray = parts, n.Kind == unstable.ArrayTable
			if !inArray && slices.Equal(parts, table) {
				tableSeen = true
				insertAt = lineEnd(end)
			}
		case unstable.KeyValue:
			parts, keyEnd := keyParts(n)
			if inArray {
				continue
			}
			full := append(slices.Clone(current), parts...)
			start := int(n.Raw.Offset)
			if slices.Equal(full, path) {
				end := start + int(n.Raw.Length)
				old := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(src[keyEnd:end])), "="))
				out := slices.Concat(src[:start], []byte(strings.TrimRight(string(src[start:keyEnd]), " \t")+" = "+val), src[end:])
				return out, old, nil
			}
			if slices.Equal(current, table) && len(parts) == 1 {
				insertAt = lineEnd(start + int(n.Raw.Length))
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, "", fmt.Errorf("reading it as TOML: %w (fix the file by hand first)", err)
	}
	line := []byte(tomlKey(leaf) + " = " + val + "\n")
	switch {
	case len(table) == 0 && firstTable >= 0:
		return slices.Concat(src[:firstTable], line, src[firstTable:]), "", nil
	case len(table) == 0:
		return slices.Concat(withNewline(src), line), "", nil
	case tableSeen && insertAt >= 0:
		return slices.Concat(withNewline(src[:insertAt]), line, src[insertAt:]), "", nil
	}
	var hdr []string
	for _, t := range table {
		hdr = append(hdr, tomlKey(t))
	}
	return slices.Concat(withNewline(src), []byte("\n["+strings.Join(hdr, ".")+"]\n"), line), "", nil
}

func withNewline(b []byte) []byte {
	if len(b) == 0 || b[len(b)-1] == '\n' {
		return b
	}
	return append(slices.Clone(b), '\n')
}

// writeFileAtomic writes body to a file of the given mode beside path,
// fsyncs it and renames it over path (renameio).
func writeFileAtomic(path string, body []byte, mode os.FileMode) error {
	return renameio.WriteFile(path, body, mode, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(mode))
}
