package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Mailboxes is the store's room for store-and-forward (IFP-8): the mail a
// relay holds for registered peers, with its quotas and retention, the
// registrations themselves, and this daemon's outbox of messages for
// peers that are away.
type Mailboxes struct{ db *bolt.DB }

// Mailboxes returns the store's mailboxes and outbox.
func (s *Store) Mailboxes() *Mailboxes { return &Mailboxes{db: s.db} }

// The mailbox (IFP-8) a relay daemon holds for peers that are away, and
// the outbox of messages this daemon could not deliver yet. Layout:
//
//	mail             recipient ‖ 0 ‖ mail ID → MailItem (mail IDs are ULIDs,
//	                 so a recipient's mail reads back in arrival order)
//	mail_by_sender   sender ‖ 0 ‖ recipient ‖ 0 ‖ mail ID → nothing, for the
//	                 per-sender quota
//	mail_by_addr     sender address ‖ 0 ‖ recipient ‖ 0 ‖ mail ID → nothing,
//	                 for the per-address quota (created on first use)
//	mail_recipients  peer ID → time it last registered ‖ 0 ‖ the address it
//	                 registered from; only registered peers get mail
//	outbox           outbox ID → OutboxItem
//
// A message and its index entries change in one transaction, so a crash
// never leaves one without the other.
//
// Registrations are a table strangers can grow, so it is bounded in all
// and per address (MailboxLimits), and a full table makes room rather than
// refuse: the registration evicted is, first, the least recently
// registered one holding no mail; only when every candidate holds mail,
// the least recently registered of those, and its mail goes with it. An
// address at its own limit makes room among its own registrations, so it
// cannot push others out. A registration holding no mail lapses idle
// after its last registration (MailboxOpen, PruneMail); one holding mail
// lasts as long as its mail.
//
// Mail quotas (MailQuota) are chosen so that fresh keys, which cost an
// attacker nothing, do not buy more room: beside the per-recipient and
// per-sender-key quotas, what is held from one network address (an IPv4
// address, an IPv6 /64) across all its keys is bounded, and the total is
// split in two: a shared pool any mail may fill, and a share reserved for
// each registered recipient that mail for it may use when the pool is
// full. The relay's mail is then at most the pool plus one share per
// registration, and a recipient's first share of mail is never refused for
// what others hold.

var (
	bucketMail           = []byte("mail")
	bucketMailBySender   = []byte("mail_by_sender")
	bucketMailByAddr     = []byte("mail_by_addr")
	bucketMailRecipients = []byte("mail_recipients")
	bucketOutbox         = []byte("outbox")
	bucketMailMeta       = []byte("mail_meta") // totals kept with the mail they count

	keyMailBytes = []byte("bytes") // message bytes held, all recipients
)

// ErrMailQuota: a mailbox is full, for the recipient or from the sender.
var ErrMailQuota = errors.New("mailbox quota exceeded")

// MailItem is one message held for a recipient.
type MailItem struct {
	ID        string    `json:"id"`             // the relay's own ID for it (a ULID)
	To        string    `json:"to"`             // recipient peer ID
	From      string    `json:"from"`           // sender peer ID (the stream's peer that published it)
	Addr      string    `json:"addr,omitempty"` // the sender's network address class (IPv4 address, IPv6 /64); "" if unknown
	MessageID string    `json:"message_id"`     // the IFP-4 message_id, to spot a sender's retry
	Received  time.Time `json:"received"`
	Expires   time.Time `json:"expires"`
	Message   []byte    `json:"message"` // the IFP-4 message as CBOR, trace entry included
}

// MailQuota bounds what PutMail accepts.
type MailQuota struct {
	MaxMessages   int // per recipient
	MaxBytes      int // per recipient, message bytes
	MaxPerSender  int // held from one sender key, across recipients
	MaxPerAddress int // held from one sender address (MailItem.Addr), across its keys and recipients; 0 is no limit
	MaxTotalBytes int // the shared pool: held for everyone together; 0 is no limit
	// Share is message bytes a registered recipient may be sent when the
	// shared pool is full; with at most m registrations, the relay holds
	// at most MaxTotalBytes + m × Share.
	Share int
}

func mailBytes(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(bucketMailMeta).Get(keyMailBytes); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func addMailBytes(tx *bolt.Tx, delta int) error {
	total := int64(mailBytes(tx)) + int64(delta)
	total = max(total, 0)
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(total))
	return tx.Bucket(bucketMailMeta).Put(keyMailBytes, v[:])
}

// MailBytes is the message bytes held for all recipients.
func (s *Mailboxes) MailBytes() (uint64, error) {
	var n uint64
	err := s.db.View(func(tx *bolt.Tx) error { n = mailBytes(tx); return nil })
	return n, err
}

func mailKey(to, id string) []byte { return []byte(to + "\x00" + id) }

func senderKey(from, to, id string) []byte { return []byte(from + "\x00" + to + "\x00" + id) }

// PutMail stores item unless a quota would be exceeded (ErrMailQuota,
// saying which). A message the same sender already published (a retry
// after a lost answer) is not stored twice: PutMail returns the first
// copy's ID.
func (s *Mailboxes) PutMail(item MailItem, q MailQuota) (id string, err error) {
	if item.To == "" || item.From == "" || item.ID == "" {
		return "", errors.New("storing mail: recipient, sender and ID are required")
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		mail, bySender := tx.Bucket(bucketMail), tx.Bucket(bucketMailBySender)
		byAddr, err := tx.CreateBucketIfNotExists(bucketMailByAddr)
		if err != nil {
			return err
		}
		count, size := 0, len(item.Message)
		prefix := []byte(item.To + "\x00")
		c := mail.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var held MailItem
			if err := decode(bucketMail, k, v, &held); err != nil {
				return err
			}
			if held.From == item.From && held.MessageID == item.MessageID {
				id = held.ID
				return nil
			}
			count++
			size += len(held.Message)
		}
		if count >= q.MaxMessages {
			return fmt.Errorf("%w: the recipient already has %d messages waiting (at most %d)", ErrMailQuota, count, q.MaxMessages)
		}
		if size > q.MaxBytes {
			return fmt.Errorf("%w: the recipient's mailbox would hold %d bytes (at most %d)", ErrMailQuota, size, q.MaxBytes)
		}
		sent := countPrefix(bySender, []byte(item.From+"\x00"), q.MaxPerSender)
		if sent >= q.MaxPerSender {
			return fmt.Errorf("%w: %d messages from this sender are already waiting (at most %d)", ErrMailQuota, sent, q.MaxPerSender)
		}
		if item.Addr != "" && q.MaxPerAddress > 0 {
			if n := countPrefix(byAddr, []byte(item.Addr+"\x00"), q.MaxPerAddress); n >= q.MaxPerAddress {
				return fmt.Errorf("%w: %d messages from the sender's address %s are already waiting, whatever the key (at most %d)",
					ErrMailQuota, n, item.Addr, q.MaxPerAddress)
			}
		}
		if total := mailBytes(tx); q.MaxTotalBytes > 0 && total+uint64(len(item.Message)) > uint64(q.MaxTotalBytes) {
			// The pool is full: the recipient's own share is still open
			// to it, if it is registered (registrations are bounded, so
			// shares are).
			registered := tx.Bucket(bucketMailRecipients).Get([]byte(item.To)) != nil
			if !registered || size > q.Share {
				return fmt.Errorf("%w: the relay holds %d bytes of mail for everyone (at most %d), and the recipient's own share of %d bytes is used",
					ErrMailQuota, total, q.MaxTotalBytes, q.Share)
			}
		}
		if err := addMailBytes(tx, len(item.Message)); err != nil {
			return err
		}
		raw, err := encode(item)
		if err != nil {
			return fmt.Errorf("encoding mail: %w", err)
		}
		if err := mail.Put(mailKey(item.To, item.ID), raw); err != nil {
			return err
		}
		id = item.ID
		if item.Addr != "" {
			if err := byAddr.Put(senderKey(item.Addr, item.To, item.ID), nil); err != nil {
				return err
			}
		}
		return bySender.Put(senderKey(item.From, item.To, item.ID), nil)
	})
	if err != nil {
		return "", fmt.Errorf("storing mail for %s: %w", item.To, err)
	}
	return id, nil
}

// Mail returns up to limit messages waiting for to, oldest first, that
// have not expired at now and fit in maxBytes together (at least one is
// returned whatever its size). more says whether others are waiting.
func (s *Mailboxes) Mail(to string, now time.Time, limit, maxBytes int) (items []MailItem, more bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		prefix := []byte(to + "\x00")
		c := tx.Bucket(bucketMail).Cursor()
		size := 0
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var item MailItem
			if err := decode(bucketMail, k, v, &item); err != nil {
				return err
			}
			if !now.Before(item.Expires) {
				continue
			}
			if len(items) >= limit || (len(items) > 0 && size+len(item.Message) > maxBytes) {
				more = true
				return nil
			}
			size += len(item.Message)
			items = append(items, item)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading mail for %s: %w", to, err)
	}
	return items, more, nil
}

// AckMail deletes the messages ids held for to and returns how many there
// were. IDs of other recipients' mail are ignored: a peer can only
// acknowledge its own.
func (s *Mailboxes) AckMail(to string, ids []string) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		mail := tx.Bucket(bucketMail)
		for _, id := range ids {
			k := mailKey(to, id)
			v := mail.Get(k)
			if v == nil {
				continue
			}
			var item MailItem
			if err := decode(bucketMail, k, v, &item); err != nil {
				return err
			}
			if err := dropMail(tx, item); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("acknowledging mail for %s: %w", to, err)
	}
	return n, nil
}

// countPrefix counts b's keys starting with prefix, up to limit (0: all).
func countPrefix(b *bolt.Bucket, prefix []byte, limit int) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || n < limit); k, _ = c.Next() {
		n++
	}
	return n
}

// dropMail deletes item with its index entries and counts, in tx.
func dropMail(tx *bolt.Tx, item MailItem) error {
	if err := tx.Bucket(bucketMail).Delete(mailKey(item.To, item.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMailBySender).Delete(senderKey(item.From, item.To, item.ID)); err != nil {
		return err
	}
	if item.Addr != "" {
		if b := tx.Bucket(bucketMailByAddr); b != nil {
			if err := b.Delete(senderKey(item.Addr, item.To, item.ID)); err != nil {
				return err
			}
		}
	}
	return addMailBytes(tx, -len(item.Message))
}

// holdsMail reports whether any mail waits for peer.
func holdsMail(tx *bolt.Tx, peer string) bool {
	prefix := []byte(peer + "\x00")
	k, _ := tx.Bucket(bucketMail).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// PruneMail deletes every message expired at now, then every registration
// that holds no mail and was last registered before idleSince, and
// returns how many messages went.
func (s *Mailboxes) PruneMail(now, idleSince time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var expired []MailItem
		err := tx.Bucket(bucketMail).ForEach(func(k, v []byte) error {
			var item MailItem
			if err := decode(bucketMail, k, v, &item); err != nil {
				return err
			}
			if !now.Before(item.Expires) {
				expired = append(expired, item)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, item := range expired {
			if err := dropMail(tx, item); err != nil {
				return err
			}
		}
		n = len(expired)
		reg := tx.Bucket(bucketMailRecipients)
		var stale [][]byte
		err = reg.ForEach(func(k, v []byte) error {
			if at, _, err := readRegistration(v); err != nil || (at.Before(idleSince) && !holdsMail(tx, string(k))) {
				stale = append(stale, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := reg.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pruning mail: %w", err)
	}
	return n, nil
}

// MailboxLimits bounds the registrations RegisterMailbox keeps.
type MailboxLimits struct {
	Max        int // registrations in all; 0 is no limit
	PerAddress int // registrations last made from one address; 0 is no limit
}

// registration is a mailbox_recipients value: when the peer last
// registered, and from which address (see MailItem.Addr), as
// "<RFC 3339 time> ‖ 0 ‖ address" (a bare time is a registration from an
// unknown address).
func registration(at time.Time, addr string) ([]byte, error) {
	v, err := at.UTC().MarshalText()
	if err != nil {
		return nil, err
	}
	return append(append(v, 0), addr...), nil
}

func readRegistration(v []byte) (at time.Time, addr string, err error) {
	t, a, _ := bytes.Cut(v, []byte{0})
	err = at.UnmarshalText(t)
	return at, string(a), err
}

// RegisterMailbox records that peer uses this relay's mailbox as of at,
// registering from addr. When that makes more registrations from addr
// than lim.PerAddress, one of that address's others goes; else, a peer not
// yet registered when lim.Max are takes the place of another. Either way
// the registration that goes is the least recently registered holding no
// mail, else the least recently registered of all, whose mail is deleted
// with it; RegisterMailbox returns whose it was. So one address can
// neither hold more than its share of the table nor push others out of it.
func (s *Mailboxes) RegisterMailbox(peer, addr string, at time.Time, lim MailboxLimits) (evicted string, err error) {
	v, err := registration(at, addr)
	if err != nil {
		return "", err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMailRecipients)
		same, total := 0, 0
		err := b.ForEach(func(k, v []byte) error {
			total++
			if _, a, _ := readRegistration(v); addr != "" && a == addr && string(k) != peer {
				same++
			}
			return nil
		})
		if err != nil {
			return err
		}
		switch {
		case lim.PerAddress > 0 && addr != "" && same >= lim.PerAddress:
			evicted, err = evictMailbox(tx, addr, peer)
		case lim.Max > 0 && b.Get([]byte(peer)) == nil && total >= lim.Max:
			evicted, err = evictMailbox(tx, "", peer)
		}
		if err != nil {
			return err
		}
		return b.Put([]byte(peer), v)
	})
	if err != nil {
		return "", fmt.Errorf("registering mailbox of %s: %w", peer, err)
	}
	return evicted, nil
}

// evictMailbox removes the registration RegisterMailbox makes room with
// (among those from addr, if addr is not "", and never except's), and its
// mail, in tx, and returns whose it was.
func evictMailbox(tx *bolt.Tx, addr, except string) (string, error) {
	var empty, full string
	var emptyAt, fullAt time.Time
	err := tx.Bucket(bucketMailRecipients).ForEach(func(k, v []byte) error {
		at, a, err := readRegistration(v)
		if err != nil {
			at = time.Time{} // unreadable: the first to go
		}
		if string(k) == except || (addr != "" && a != addr) {
			return nil
		}
		if holdsMail(tx, string(k)) {
			if full == "" || at.Before(fullAt) {
				full, fullAt = string(k), at
			}
		} else if empty == "" || at.Before(emptyAt) {
			empty, emptyAt = string(k), at
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	victim := empty
	if victim == "" {
		victim = full
	}
	if victim == "" {
		return "", nil
	}
	var held []MailItem
	prefix := []byte(victim + "\x00")
	c := tx.Bucket(bucketMail).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var item MailItem
		if err := decode(bucketMail, k, v, &item); err != nil {
			return "", err
		}
		held = append(held, item)
	}
	for _, item := range held {
		if err := dropMail(tx, item); err != nil {
			return "", err
		}
	}
	return victim, tx.Bucket(bucketMailRecipients).Delete([]byte(victim))
}

// MailboxOpen reports whether peer has a mailbox here: it is registered,
// and it either holds mail or registered at or after idleSince.
func (s *Mailboxes) MailboxOpen(peer string, idleSince time.Time) (bool, error) {
	open := false
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMailRecipients).Get([]byte(peer))
		if v == nil {
			return nil
		}
		at, _, err := readRegistration(v)
		if err != nil {
			return err
		}
		open = !at.Before(idleSince) || holdsMail(tx, peer)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("reading mailbox registration of %s: %w", peer, err)
	}
	return open, nil
}

// Registrations counts the registered mailboxes.
func (s *Mailboxes) Registrations() (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error { n = countPrefix(tx.Bucket(bucketMailRecipients), nil, 0); return nil })
	if err != nil {
		return 0, fmt.Errorf("counting mailboxes: %w", err)
	}
	return n, nil
}

// Queues are the mail this store holds now: messages held in the
// mailboxes for others and their bytes, and this daemon's own outbox.
type Queues struct {
	Held      int
	HeldBytes uint64
	Outbox    int
}

// Queues counts the mail held and queued, in one read (each bucket's
// pages walked, no record decoded).
func (s *Mailboxes) Queues() (Queues, error) {
	var q Queues
	err := s.db.View(func(tx *bolt.Tx) error {
		q = Queues{Held: tx.Bucket(bucketMail).Stats().KeyN, HeldBytes: mailBytes(tx), Outbox: tx.Bucket(bucketOutbox).Stats().KeyN}
		return nil
	})
	if err != nil {
		return Queues{}, fmt.Errorf("counting mail: %w", err)
	}
	return q, nil
}

// OutboxItem is a message this daemon could not deliver yet.
type OutboxItem struct {
	ID          string    `json:"id"`      // the message's message_id
	To          string    `json:"to"`      // recipient peer ID
	Message     []byte    `json:"message"` // the signed IFP-4 message as CBOR
	Queued      time.Time `json:"queued"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt"`
	LastError   string    `json:"last_error,omitempty"`
}

// PutOutbox stores or replaces item.
func (s *Mailboxes) PutOutbox(item OutboxItem) error {
	raw, err := encode(item)
	if err != nil {
		return fmt.Errorf("encoding outbox item: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Put([]byte(item.ID), raw) })
	if err != nil {
		return fmt.Errorf("queueing message %s: %w", item.ID, err)
	}
	return nil
}

// Outbox returns every queued message, in ID order.
func (s *Mailboxes) Outbox() ([]OutboxItem, error) {
	var items []OutboxItem
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			var item OutboxItem
			if err := decode(bucketOutbox, k, v, &item); err != nil {
				return err
			}
			items = append(items, item)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading outbox: %w", err)
	}
	return items, nil
}

// DeleteOutbox removes a delivered (or abandoned) message.
func (s *Mailboxes) DeleteOutbox(id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Delete([]byte(id)) })
	if err != nil {
		return fmt.Errorf("removing %s from the outbox: %w", id, err)
	}
	return nil
}
