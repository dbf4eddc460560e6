//! Joining predictions with gold labels on `id` without holding either file.
//! Lines are read a chunk at a time and parsed on every core; of each row
//! only what the join needs is kept: the gold rows' ids (as 128-bit keyed
//! hashes), lines and values, then the joined pairs. The predictions' ids
//! are checked for repeats in bounded memory ([`SeenIds`]).

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use verifine_base::files::{JsonlLines, id_string, line_text};
use verifine_base::{IdHasher, SeenIds};

/// Lines parsed per chunk (split between the threads).
const CHUNK_LINES: usize = 8192;

/// A field's value: a label or a number.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field {
    Label(bool),
    Number(f64),
}

/// A field as read. A value that is neither a number nor a boolean is an
/// error only if its row is joined, so it is kept until then.
enum Read {
    Missing,
    Present(Field),
    Invalid(Box<str>),
}

/// What the join leaves: the pairs every metric covers, and the counts the
/// report gives.
pub(super) struct Joined {
    pub pairs: Vec<(Field, Field)>,
    pub pred_rows: usize,
    pub gold_rows: usize,
    /// Ids in both files.
    pub matched: usize,
    /// Joined rows where either field was missing or null.
    pub missing_values: usize,
}

/// One side of the join: a file and the (dotted) field read from it.
pub(super) struct Side<'a> {
    pub path: &'a Path,
    pub field: &'a str,
}

/// One parsed row.
struct Row {
    line: usize,
    id: String,
    hash: u128,
    field: Read,
}

/// A gold row as the join keeps it.
struct GoldRow {
    line: usize,
    field: Read,
    matched: bool,
}

/// Joins `pred` with `gold` on `id`, reading each file once with `threads`
/// threads. A repeated id in either file is an error, whether or not the
/// other file has it, and comes before a field error.
pub(super) fn join(pred: Side, gold: Side, threads: usize) -> Result<Joined> {
    let id_hasher = IdHasher::new();
    let mut gold_rows: HashMap<u128, GoldRow> = HashMap::new();
    for_each_row(&gold, &id_hasher, threads, |row| {
        match gold_rows.entry(row.hash) {
            Entry::Occupied(_) => bail!(
                "{}:{}: duplicate id {:?}",
                gold.path.display(),
                row.line,
                row.id
            ),
            Entry::Vacant(slot) => {
                slot.insert(GoldRow {
                    line: row.line,
                    field: row.field,
                    matched: false,
                });
                Ok(())
            }
        }
    })?;

    let mut pred_ids = SeenIds::new();
    let mut joined = Joined {
        pairs: Vec::new(),
        pred_rows: 0,
        gold_rows: gold_rows.len(),
        matched: 0,
        missing_values: 0,
    };
    let mut field_error = None;
    for_each_row(&pred, &id_hasher, threads, |row| {
        joined.pred_rows += 1;
        if let Some(repeat) = pred_ids.insert(row.hash, row.line)? {
            let id = (repeat.again == row.line).then_some(row.id.as_str());
            bail!(
                "{}:{}: {}",
                pred.path.display(),
                repeat.again,
                repeat.message(id)
            );
        }
        let Some(gold_row) = gold_rows.get_mut(&row.hash) else {
            return Ok(());
        };
        gold_row.matched = true;
        joined.matched += 1;
        let fields = field_of(&row.field, &pred, row.line)
            .and_then(|p| Ok((p, field_of(&gold_row.field, &gold, gold_row.line)?)));
        match fields {
            Ok((Some(p), Some(g))) => joined.pairs.push((p, g)),
            Ok(_) => joined.missing_values += 1,
            Err(e) => {
                field_error.get_or_insert(e);
            }
        }
        Ok(())
    })?;
    if let Some(repeat) = pred_ids.finish()? {
        bail!(
            "{}:{}: {}",
            pred.path.display(),
            repeat.again,
            repeat.message(None)
        );
    }
    match field_error {
        Some(e) => Err(e),
        None => Ok(joined),
    }
}

fn field_of(read: &Read, side: &Side, line: usize) -> Result<Option<Field>> {
    match read {
        Read::Missing => Ok(None),
        Read::Present(field) => Ok(Some(*field)),
        Read::Invalid(found) => bail!(
            "{}:{line}: field {:?} must be a number or a boolean, found {found}",
            side.path.display(),
            side.field
        ),
    }
}

/// Hands the rows of `side`'s file to `each` in file order, parsed by
/// `threads` threads a chunk of lines at a time.
fn for_each_row(
    side: &Side,
    id_hasher: &IdHasher,
    threads: usize,
    mut each: impl FnMut(Row) -> Result<()>,
) -> Result<()> {
    let path = side.path;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut lines = JsonlLines::new(BufReader::with_capacity(1 << 20, file), path);
    while let Some(chunk) = lines.read_chunk(CHUNK_LINES)? {
        let parse = |part: &[(usize, std::ops::Range<usize>)]| -> Vec<Result<Option<Row>>> {
            part.iter()
                .map(|(line, range)| parse_row(side, id_hasher, *line, chunk.line(range)))
                .collect()
        };
        let parsed: Vec<Vec<Result<Option<Row>>>> = if threads <= 1 {
            vec![parse(&chunk.lines)]
        } else {
            std::thread::scope(|scope| {
                let workers: Vec<_> = chunk
                    .lines
                    .chunks(chunk.lines.len().div_ceil(threads))
                    .map(|part| scope.spawn(move || parse(part)))
                    .collect();
                workers
                    .into_iter()
                    .map(|w| w.join().expect("a parsing thread panicked"))
                    .collect()
            })
        };
        for row in parsed.into_iter().flatten() {
            if let Some(row) = row? {
                each(row)?;
            }
        }
    }
    Ok(())
}

/// One line's id and field; `None` for a blank line. The row's other
/// fields (prompts, responses) are checked as JSON but never copied.
fn parse_row(side: &Side, id_hasher: &IdHasher, line: usize, bytes: &[u8]) -> Result<Option<Row>> {
    let path = side.path;
    let Some(text) = line_text(path, line, bytes)? else {
        return Ok(None);
    };
    let top: HashMap<Cow<str>, &RawValue> =
        serde_json::from_str(text).map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
    let id = top
        .get("id")
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .as_ref()
        .and_then(id_string)
        .ok_or_else(|| anyhow!("{}:{line}: no string or number `id`", path.display()))?;
    let (first, rest) = match side.field.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (side.field, None),
    };
    let value = match top.get(first) {
        None => None,
        Some(raw) => {
            let value: Value = serde_json::from_str(raw.get())
                .map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
            match rest {
                None => Some(value),
                Some(rest) => rest
                    .split('.')
                    .try_fold(value, |v, key| v.get(key).cloned()),
            }
        }
    };
    let field = match value {
        None | Some(Value::Null) => Read::Missing,
        Some(Value::Bool(b)) => Read::Present(Field::Label(b)),
        Some(Value::Number(n)) => n
            .as_f64()
            .map_or(Read::Missing, |x| Read::Present(Field::Number(x))),
        Some(other) => Read::Invalid(other.to_string().into_boxed_str()),
    };
    Ok(Some(Row {
        hash: id_hasher.hash(&id),
        line,
        id,
        field,
    }))
}
