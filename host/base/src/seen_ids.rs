//! Telling a repeated id in a file of any size, in bounded memory. Ids
//! arrive as 128-bit hashes with their line numbers; up to a limit they are
//! held in a hash map (a repeat among them is seen at once), beyond it the
//! map is written out as a sorted run to a scratch file and emptied. The
//! runs are merged, in the manner of an external sort, when a repeat must
//! be placed exactly: at the end of the input, or when the map sees one.
//! Whatever the spill limit, the answer is the one a check holding every id
//! would give: the first line, in file order, whose id an earlier line had.

use crate::files::FileError;
use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A repeated id: the line that repeats it, and the line it was first on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    /// The line the id first appeared on.
    pub first: usize,
    /// The first line, in file order, whose id an earlier line had.
    pub again: usize,
}

impl Repeat {
    /// The error's text for line `again`; `id` is named when the caller
    /// has it (the id of line `again`).
    pub fn message(&self, id: Option<&str>) -> String {
        match id {
            Some(id) => format!("duplicate id {id:?} (first on line {})", self.first),
            None => format!(
                "duplicate id: line {}'s id repeats line {}'s",
                self.again, self.first
            ),
        }
    }
}

/// Hashes ids to the 128 bits [`SeenIds`] keeps, with keys drawn anew for
/// each hasher: two ids collide with probability about 2⁻¹²⁸ per pair, and
/// no input can aim for a collision.
pub struct IdHasher(RandomState);

impl IdHasher {
    /// A hasher with fresh keys.
    pub fn new() -> Self {
        IdHasher(RandomState::new())
    }

    /// The id's 128-bit hash under this hasher's keys.
    pub fn hash(&self, id: &str) -> u128 {
        let half = |salt: u8| {
            let mut h = self.0.build_hasher();
            salt.hash(&mut h);
            id.hash(&mut h);
            h.finish()
        };
        (u128::from(half(0)) << 64) | u128::from(half(1))
    }
}

impl Default for IdHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes of one spilled id: the hash, then the line, little-endian.
const RECORD: usize = 24;

/// Memory the merge's read buffers may take together.
const MERGE_BUFFER_BYTES: usize = 8 << 20;

/// The ids seen so far, in at most `limit` map entries plus sorted runs on
/// disk.
pub struct SeenIds {
    recent: HashMap<u128, usize>,
    limit: usize,
    scratch_dir: PathBuf,
    spill: Option<Spill>,
}

impl SeenIds {
    /// Ids held in memory before they spill: about 12 MiB of map.
    pub const DEFAULT_LIMIT: usize = 1 << 18;

    /// Spills to the system's temporary directory after
    /// [`Self::DEFAULT_LIMIT`] ids.
    pub fn new() -> Self {
        Self::with_limit(Self::DEFAULT_LIMIT, &std::env::temp_dir())
    }

    /// Spills into `scratch_dir` after `limit` ids (at least one).
    pub fn with_limit(limit: usize, scratch_dir: &Path) -> Self {
        let limit = limit.max(1);
        SeenIds {
            recent: HashMap::with_capacity(limit.min(Self::DEFAULT_LIMIT)),
            limit,
            scratch_dir: scratch_dir.to_path_buf(),
            spill: None,
        }
    }

    /// Records the id hashed to `hash` on `line` (lines come in increasing
    /// order). Returns the first repeat of the file so far as soon as one
    /// is known, which is no later than when this line repeats an id still
    /// in memory; [`Self::finish`] finds the rest.
    pub fn insert(&mut self, hash: u128, line: usize) -> Result<Option<Repeat>, FileError> {
        if let Some(&first) = self.recent.get(&hash) {
            if self.spill.is_none() {
                return Ok(Some(Repeat { first, again: line }));
            }
            return self.first_repeat(Some((hash, line)));
        }
        if self.recent.len() >= self.limit {
            self.spill_recent()?;
        }
        self.recent.insert(hash, line);
        Ok(None)
    }

    /// After the last id: the file's first repeat, if it has one.
    pub fn finish(self) -> Result<Option<Repeat>, FileError> {
        if self.spill.is_none() {
            return Ok(None);
        }
        self.first_repeat(None)
    }

    fn spill_recent(&mut self) -> Result<(), FileError> {
        let mut run: Vec<(u128, usize)> = self.recent.drain().collect();
        run.sort_unstable();
        let spill = match &mut self.spill {
            Some(spill) => spill,
            None => self.spill.insert(Spill::create(&self.scratch_dir)?),
        };
        spill.append_run(&run)
    }

    /// Merges the runs and the map (with `extra`, a line not yet recorded)
    /// in hash order; within one hash the lines come in order, so a group's
    /// second line is its repeat, and the smallest of those is the file's
    /// first.
    fn first_repeat(&self, extra: Option<(u128, usize)>) -> Result<Option<Repeat>, FileError> {
        let mut in_memory: Vec<(u128, usize)> = self.recent.iter().map(|(h, l)| (*h, *l)).collect();
        in_memory.extend(extra);
        in_memory.sort_unstable();
        let mut sources: Vec<Source> = match &self.spill {
            Some(spill) => spill.readers()?,
            None => Vec::new(),
        };
        sources.push(Source::Memory(in_memory.into_iter()));
        let mut heads = BinaryHeap::new();
        for (index, source) in sources.iter_mut().enumerate() {
            if let Some((hash, line)) = source.next()? {
                heads.push(Reverse((hash, line, index)));
            }
        }
        let mut best: Option<Repeat> = None;
        let mut previous: Option<(u128, usize)> = None;
        while let Some(Reverse((hash, line, index))) = heads.pop() {
            match previous {
                Some((h, first)) if h == hash => {
                    if best.is_none_or(|b| line < b.again) {
                        best = Some(Repeat { first, again: line });
                    }
                }
                _ => previous = Some((hash, line)),
            }
            if let Some((hash, line)) = sources[index].next()? {
                heads.push(Reverse((hash, line, index)));
            }
        }
        Ok(best)
    }
}

impl Default for SeenIds {
    fn default() -> Self {
        Self::new()
    }
}

/// The scratch file of sorted runs; removed when dropped.
struct Spill {
    file: File,
    path: PathBuf,
    /// Each run's first record and length, in records.
    runs: Vec<(u64, u64)>,
    records: u64,
}

impl Spill {
    fn create(dir: &Path) -> Result<Spill, FileError> {
        let path = dir.join(format!(
            ".verifine-seen-ids-{}-{:016x}",
            std::process::id(),
            crate::os_random_u64()
        ));
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| FileError::io("creating", &path, e))?;
        Ok(Spill {
            file,
            path,
            runs: Vec::new(),
            records: 0,
        })
    }

    fn append_run(&mut self, run: &[(u128, usize)]) -> Result<(), FileError> {
        let mut out = BufWriter::with_capacity(1 << 16, &self.file);
        for (hash, line) in run {
            let mut record = [0u8; RECORD];
            record[..16].copy_from_slice(&hash.to_le_bytes());
            record[16..].copy_from_slice(&(*line as u64).to_le_bytes());
            out.write_all(&record)
                .map_err(|e| FileError::io("writing", &self.path, e))?;
        }
        out.flush()
            .map_err(|e| FileError::io("writing", &self.path, e))?;
        self.runs.push((self.records, run.len() as u64));
        self.records += run.len() as u64;
        Ok(())
    }

    fn readers(&self) -> Result<Vec<Source<'_>>, FileError> {
        let per_run = (MERGE_BUFFER_BYTES / RECORD / self.runs.len().max(1)).clamp(256, 4096);
        Ok(self
            .runs
            .iter()
            .map(|&(start, len)| {
                Source::Run(RunReader {
                    spill: self,
                    next: start,
                    end: start + len,
                    buffer: Vec::with_capacity(per_run * RECORD),
                    position: 0,
                    per_read: per_run,
                })
            })
            .collect())
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One sorted sequence the merge reads.
enum Source<'a> {
    Run(RunReader<'a>),
    Memory(std::vec::IntoIter<(u128, usize)>),
}

impl Source<'_> {
    fn next(&mut self) -> Result<Option<(u128, usize)>, FileError> {
        match self {
            Source::Memory(entries) => Ok(entries.next()),
            Source::Run(run) => run.next(),
        }
    }
}

/// A run read back through its own buffer.
struct RunReader<'a> {
    spill: &'a Spill,
    next: u64,
    end: u64,
    buffer: Vec<u8>,
    position: usize,
    per_read: usize,
}

impl RunReader<'_> {
    fn next(&mut self) -> Result<Option<(u128, usize)>, FileError> {
        if self.position == self.buffer.len() {
            if self.next == self.end {
                return Ok(None);
            }
            let records = (self.end - self.next).min(self.per_read as u64) as usize;
            self.buffer.resize(records * RECORD, 0);
            read_exact_at(
                &self.spill.file,
                &mut self.buffer,
                self.next * RECORD as u64,
            )
            .map_err(|e| FileError::io("reading", &self.spill.path, e))?;
            self.next += records as u64;
            self.position = 0;
        }
        let record = &self.buffer[self.position..self.position + RECORD];
        self.position += RECORD;
        let hash = u128::from_le_bytes(record[..16].try_into().expect("16 bytes"));
        let line = u64::from_le_bytes(record[16..].try_into().expect("8 bytes"));
        Ok(Some((hash, line as usize)))
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buffer.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buffer, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SplitMix64;

    /// Every id's first line, checked one by one: what any limit must agree
    /// with.
    fn holding_everything(ids: &[u128]) -> Option<Repeat> {
        let mut first = HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            if let Some(&f) = first.get(id) {
                return Some(Repeat {
                    first: f,
                    again: i + 1,
                });
            }
            first.insert(*id, i + 1);
        }
        None
    }

    fn check(ids: &[u128], limit: usize) -> Option<Repeat> {
        let dir = std::env::temp_dir();
        let mut seen = SeenIds::with_limit(limit, &dir);
        for (i, id) in ids.iter().enumerate() {
            if let Some(repeat) = seen.insert(*id, i + 1).unwrap() {
                return Some(repeat);
            }
        }
        seen.finish().unwrap()
    }

    #[test]
    fn any_spill_limit_finds_the_repeat_a_full_map_finds() {
        let mut rng = SplitMix64::new(7);
        for case in 0..200 {
            let n = 1 + (rng.next_u64() % 300) as usize;
            // Small id spaces repeat often; large ones rarely or never.
            let space = 1 + rng.next_u64() % (4 * n as u64);
            let ids: Vec<u128> = (0..n).map(|_| u128::from(rng.next_u64() % space)).collect();
            for limit in [1, 2, 7, 64, 1000] {
                assert_eq!(
                    check(&ids, limit),
                    holding_everything(&ids),
                    "case {case}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn a_repeat_across_spilled_runs_is_found_at_the_end() {
        // Line 2 repeats line 1's id only across runs of one id each; line 5
        // repeats line 4's within memory too, but line 2 comes first.
        let ids = [10, 10, 11, 12, 12];
        assert_eq!(check(&ids, 1), Some(Repeat { first: 1, again: 2 }));
        let distinct: Vec<u128> = (0..5000).collect();
        assert_eq!(check(&distinct, 100), None);
    }

    #[test]
    fn the_scratch_file_is_removed_when_done() {
        let dir = verifine_test_support::scratch_dir("seen-ids-test");
        let mut seen = SeenIds::with_limit(4, &dir);
        for line in 1..=100 {
            assert_eq!(seen.insert(line as u128, line).unwrap(), None);
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert_eq!(seen.finish().unwrap(), None);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
}
