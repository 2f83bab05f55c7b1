//! Manifests on disk.
//!
//! Version 2 (`manifests/<id>.v2`, written since): binary, either **full** (every record)
//! or a **delta** against its parent (the paths removed and the records added or changed,
//! a few hundred bytes for one changed file instead of rewriting every path). A full one is
//! written every [`MAX_DEPTH`] checkpoints, when a delta would be large, and when pruning
//! would remove a delta's parent, so reading any checkpoint reads one full manifest and at
//! most `MAX_DEPTH` small deltas.
//!
//! ```text
//! "TORENCP2"  kind (0 full, 1 delta)  id  created_ms  depth  [parent]  skipped
//! full:  n  record*n            delta:  n  path*n (removed)  m  record*m (upserts)
//! "END2"  n (+ m)
//! ```
//!
//! Numbers are LEB128 varints (signed ones zigzag), strings a length and UTF-8 bytes, and a
//! record's path is the length it shares with the record before it plus the rest (sorted
//! paths share long prefixes). A record: path, mode, then `0` (directory), `1` size,
//! SHA-256 (32 bytes), mtime, ctime, inode (file) or `2` target, `0`/`1` + size, mtime,
//! ctime, inode (symlink, with what `lstat` said when the target was read). A file cut short
//! or with anything left after the trailer does not decode.
//!
//! Version 1 (`manifests/<id>.json`, the [`Manifest`] as JSON) is still read.

use crate::Manifest;
use crate::manifest::{Delta, Rec, RecKind, Seen, Snap};

const MAGIC: &[u8; 8] = b"TORENCP2";
const TRAILER: &[u8; 4] = b"END2";

/// Deltas allowed between two full manifests.
pub(crate) const MAX_DEPTH: u32 = 64;

/// A version 2 file: a whole checkpoint, or what one changed against its parent.
pub(crate) enum Decoded {
    Full(Snap),
    Delta { snap: Snap, delta: Delta },
}

pub(crate) fn encode_full(snap: &Snap) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + snap.entries.len() * 72);
    header(&mut out, snap, None);
    put_len(&mut out, snap.entries.len());
    let mut prev = "";
    for rec in &snap.entries {
        put_rec(&mut out, prev, rec);
        prev = &rec.path;
    }
    out.extend_from_slice(TRAILER);
    put_len(&mut out, snap.entries.len());
    out
}

/// `snap` is the checkpoint the delta makes (its id, time, depth, skipped names).
pub(crate) fn encode_delta(snap: &Snap, delta: &Delta) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + delta.upserts.len() * 96);
    header(&mut out, snap, Some(&delta.parent));
    put_len(&mut out, delta.removed.len());
    let mut prev = "";
    for path in &delta.removed {
        put_path(&mut out, prev, path);
        prev = path;
    }
    put_len(&mut out, delta.upserts.len());
    let mut prev = "";
    for rec in &delta.upserts {
        put_rec(&mut out, prev, rec);
        prev = &rec.path;
    }
    out.extend_from_slice(TRAILER);
    put_len(&mut out, delta.removed.len() + delta.upserts.len());
    out
}

fn header(out: &mut Vec<u8>, snap: &Snap, parent: Option<&str>) {
    out.extend_from_slice(MAGIC);
    out.push(u8::from(parent.is_some()));
    put_str(out, &snap.id);
    put_u(out, snap.created_ms);
    put_u(out, u64::from(snap.depth));
    if let Some(parent) = parent {
        put_str(out, parent);
    }
    put_len(out, snap.skipped.len());
    for name in &snap.skipped {
        put_str(out, name);
    }
}

/// Why a version 2 file does not decode.
pub(crate) type Bad = &'static str;

pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, Bad> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a version 2 manifest");
    }
    let kind = r.byte()?;
    let id = r.string()?;
    let created_ms = r.u()?;
    let depth = u32::try_from(r.u()?).map_err(|_| "depth out of range")?;
    let parent = if kind == 1 { Some(r.string()?) } else { None };
    let skipped = {
        let n = r.len()?;
        let mut v = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            v.push(r.string()?);
        }
        v
    };
    let mut snap = Snap {
        id,
        created_ms,
        entries: Vec::new(),
        skipped,
        depth,
    };
    let (decoded, count) = match (kind, parent) {
        (0, None) => {
            let n = r.len()?;
            let mut entries = Vec::with_capacity(n.min(1 << 20));
            let mut prev = String::new();
            for _ in 0..n {
                let rec = r.rec(&prev)?;
                prev.clone_from(&rec.path);
                entries.push(rec);
            }
            snap.entries = entries;
            (Decoded::Full(snap), n)
        }
        (1, Some(parent)) => {
            let n = r.len()?;
            let mut removed = Vec::with_capacity(n.min(1 << 20));
            let mut prev = String::new();
            for _ in 0..n {
                let path = r.path(&prev)?;
                prev.clone_from(&path);
                removed.push(path);
            }
            let m = r.len()?;
            let mut upserts = Vec::with_capacity(m.min(1 << 20));
            let mut prev = String::new();
            for _ in 0..m {
                let rec = r.rec(&prev)?;
                prev.clone_from(&rec.path);
                upserts.push(rec);
            }
            let delta = Delta {
                parent,
                removed,
                upserts,
            };
            (Decoded::Delta { snap, delta }, n + m)
        }
        _ => return Err("unknown manifest kind"),
    };
    if r.take(TRAILER.len())? != TRAILER || r.len()? != count || r.at != bytes.len() {
        return Err("cut short or followed by more");
    }
    Ok(decoded)
}

/// A version 1 (JSON) manifest.
pub(crate) fn decode_v1(bytes: &[u8]) -> Result<Snap, V1Error> {
    let manifest: Manifest = serde_json::from_slice(bytes).map_err(V1Error::Json)?;
    let entries = manifest
        .entries
        .into_iter()
        .map(Rec::from_entry)
        .collect::<Option<Vec<_>>>()
        .ok_or(V1Error::Hash)?;
    Ok(Snap {
        id: manifest.id,
        created_ms: manifest.created_ms,
        entries,
        skipped: manifest.skipped,
        depth: 0,
    })
}

pub(crate) enum V1Error {
    Json(serde_json::Error),
    Hash,
}

fn put_u(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_i(out: &mut Vec<u8>, v: i64) {
    put_u(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_u(out, n as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_path(out: &mut Vec<u8>, prev: &str, path: &str) {
    let shared = prev
        .bytes()
        .zip(path.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    // Split at a character boundary, so that each part is UTF-8.
    let shared = (0..=shared)
        .rev()
        .find(|&i| path.is_char_boundary(i))
        .unwrap_or(0);
    put_len(out, shared);
    put_str(out, &path[shared..]);
}

fn put_rec(out: &mut Vec<u8>, prev: &str, rec: &Rec) {
    put_path(out, prev, &rec.path);
    put_u(out, u64::from(rec.mode));
    match &rec.kind {
        RecKind::Dir => out.push(0),
        RecKind::File {
            size,
            hash,
            mtime_ns,
            ctime_ns,
            ino,
        } => {
            out.push(1);
            put_u(out, *size);
            out.extend_from_slice(hash);
            put_i(out, *mtime_ns);
            put_i(out, *ctime_ns);
            put_u(out, *ino);
        }
        RecKind::Symlink { target, seen } => {
            out.push(2);
            put_str(out, target);
            match seen {
                None => out.push(0),
                Some(s) => {
                    out.push(1);
                    put_u(out, s.size);
                    put_i(out, s.mtime_ns);
                    put_i(out, s.ctime_ns);
                    put_u(out, s.ino);
                }
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.at.checked_add(n).ok_or("cut short")?;
        let slice = self.bytes.get(self.at..end).ok_or("cut short")?;
        self.at = end;
        Ok(slice)
    }

    fn byte(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }

    fn u(&mut self) -> Result<u64, Bad> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("number too long")
    }

    fn i(&mut self) -> Result<i64, Bad> {
        let z = self.u()?;
        Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    fn len(&mut self) -> Result<usize, Bad> {
        usize::try_from(self.u()?).map_err(|_| "length out of range")
    }

    fn string(&mut self) -> Result<String, Bad> {
        let n = self.len()?;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| "not UTF-8")
    }

    fn path(&mut self, prev: &str) -> Result<String, Bad> {
        let shared = self.len()?;
        let head = prev.get(..shared).ok_or("bad shared prefix")?;
        let n = self.len()?;
        let rest = std::str::from_utf8(self.take(n)?).map_err(|_| "not UTF-8")?;
        let mut path = String::with_capacity(shared + n);
        path.push_str(head);
        path.push_str(rest);
        Ok(path)
    }

    fn rec(&mut self, prev: &str) -> Result<Rec, Bad> {
        let path = self.path(prev)?;
        let mode = u32::try_from(self.u()?).map_err(|_| "mode out of range")?;
        let kind = match self.byte()? {
            0 => RecKind::Dir,
            1 => {
                let size = self.u()?;
                let mut hash = [0u8; 32];
                hash.copy_from_slice(self.take(32)?);
                RecKind::File {
                    size,
                    hash,
                    mtime_ns: self.i()?,
                    ctime_ns: self.i()?,
                    ino: self.u()?,
                }
            }
            2 => {
                let target = self.string()?;
                let seen = match self.byte()? {
                    0 => None,
                    1 => Some(Seen {
                        size: self.u()?,
                        mtime_ns: self.i()?,
                        ctime_ns: self.i()?,
                        ino: self.u()?,
                    }),
                    _ => return Err("bad symlink record"),
                };
                RecKind::Symlink { target, seen }
            }
            _ => return Err("unknown record kind"),
        };
        Ok(Rec { path, mode, kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &str, kind: RecKind) -> Rec {
        Rec {
            path: path.to_owned(),
            mode: 0o644,
            kind,
        }
    }

    fn sample() -> (Snap, Delta) {
        let file = RecKind::File {
            size: 3,
            hash: [7; 32],
            mtime_ns: -5,
            ctime_ns: 1_764_600_000_123_456_789,
            ino: u64::MAX,
        };
        let link = RecKind::Symlink {
            target: "../ü/x".to_owned(),
            seen: Some(Seen {
                size: 6,
                mtime_ns: 1,
                ctime_ns: 2,
                ino: 3,
            }),
        };
        let snap = Snap {
            id: "01kbdz6m2q8n3v5x7y9a1c3e5h".to_owned(),
            created_ms: 1_764_600_000_000,
            entries: vec![
                rec("a", RecKind::Dir),
                rec("a/é1", file.clone()),
                rec("a/é2", link),
                rec(
                    "b",
                    RecKind::Symlink {
                        target: "a".to_owned(),
                        seen: None,
                    },
                ),
            ],
            skipped: vec!["fifo".to_owned()],
            depth: 3,
        };
        let delta = Delta {
            parent: "01kbdz6m2q8n3v5x7y9a1c3e5g".to_owned(),
            removed: vec!["a/old".to_owned(), "z".to_owned()],
            upserts: vec![rec("a/é1", file)],
        };
        (snap, delta)
    }

    #[test]
    fn full_and_delta_read_back_as_written() {
        let (snap, delta) = sample();
        let Ok(Decoded::Full(back)) = decode(&encode_full(&snap)) else {
            panic!("a full manifest decodes as one");
        };
        assert_eq!(
            (
                &back.id,
                back.created_ms,
                &back.entries,
                &back.skipped,
                back.depth
            ),
            (
                &snap.id,
                snap.created_ms,
                &snap.entries,
                &snap.skipped,
                snap.depth
            )
        );
        let Ok(Decoded::Delta {
            snap: head,
            delta: d,
        }) = decode(&encode_delta(&snap, &delta))
        else {
            panic!("a delta decodes as one");
        };
        assert_eq!(
            (&head.id, head.depth, &head.skipped),
            (&snap.id, 3, &snap.skipped)
        );
        assert_eq!(
            (&d.parent, &d.removed, &d.upserts),
            (&delta.parent, &delta.removed, &delta.upserts)
        );
    }

    /// A file cut anywhere, or with anything after it, is refused rather than read as a
    /// smaller checkpoint.
    #[test]
    fn a_cut_or_lengthened_file_does_not_decode() {
        let (snap, delta) = sample();
        for bytes in [encode_full(&snap), encode_delta(&snap, &delta)] {
            for cut in 0..bytes.len() {
                assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode(&longer).is_err());
        }
    }
}
