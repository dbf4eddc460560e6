//! What one render of a chat template may cost. A template comes with a
//! downloaded model and is hostile input: without bounds, nested loops
//! hang, `'x' * n` or `s ~ s` doubling exhausts memory, and a huge width
//! aborts the process. Every render carries a [`Budget`] (thread-local:
//! minijinja calls back on the thread that renders) that the guards the
//! program runs ([`super::program`]), the bounded builtins
//! ([`super::builtins`]) and the output formatter all draw on.

use minijinja::value::{Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind, Output, State};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest template source compiled. Real templates are 1–20 KB (the
/// longest are tool-calling ones); 256 KiB leaves ten times that, and
/// compiling stays linear in it.
pub const MAX_TEMPLATE_BYTES: usize = 256 << 10;

/// Instructions one render may run (minijinja's fuel, the guards
/// included). SmolLM2's ChatML template takes about 30 a message and
/// Qwen3's about 90, so 2 million covers conversations of 20 000 turns,
/// while a runaway loop stops in a fraction of a second (debug build).
pub const MAX_RENDER_FUEL: u64 = 2_000_000;

/// The largest value a template may make — string bytes, plus one per
/// item, key and scalar, nested — and the longest text it may render:
/// 4 MiB is about a million tokens, past any model's context.
pub const MAX_VALUE_SIZE: usize = 4 << 20;

/// All a template may make or write in one render, in the units of
/// [`MAX_VALUE_SIZE`]: sixteen times the largest text, enough for a
/// template that rebuilds its prompt piece by piece, and a bound on the
/// memory (and, at a few nanoseconds a unit, the time) `s ~ s` doubling or
/// a loop of copies can take.
pub const MAX_RENDER_WORK: usize = 64 << 20;

/// The deepest nesting of lists and maps a template may build. Tool
/// schemas nest about ten levels; 64 keeps every recursive walk over a
/// value (display, comparison, JSON) far from the stack's end.
pub const MAX_VALUE_DEPTH: usize = 64;

/// The largest width or count a template may pass a builtin (`indent`,
/// `tojson(indent=…)`, `batch`, `slice`, a `format` width or precision, a
/// string method's count): real templates pass single digits.
pub const MAX_WIDTH: usize = 10_000;

/// Nesting of macro calls, loops and `with` blocks (minijinja's recursion
/// limit, where a macro call counts about six): about 80 nested macro
/// calls, against a handful in real templates. It is minijinja's default
/// and its ceiling; a recursive macro stopped there stays inside a 2 MiB
/// thread stack even in a debug build (tests/hostile_templates.rs).
pub const MAX_RECURSION: usize = 500;

/// Wall-clock bound on one render, a backstop behind the limits above for
/// operations whose cost grows with their inputs without making anything
/// (comparisons, searches). Real renders take milliseconds.
pub const MAX_RENDER_TIME: Duration = Duration::from_secs(3);

struct Budget {
    deadline: Instant,
    work_left: usize,
    /// The first limit the render hit, reported instead of minijinja's
    /// wrapping of it.
    refusal: Option<String>,
}

thread_local! {
    static BUDGET: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// The budget of the render in progress on this thread, from `start` until
/// dropped.
pub(crate) struct Metered(());

impl Metered {
    pub(crate) fn start() -> Self {
        BUDGET.with(|b| {
            *b.borrow_mut() = Some(Budget {
                deadline: Instant::now() + MAX_RENDER_TIME,
                work_left: MAX_RENDER_WORK,
                refusal: None,
            })
        });
        Metered(())
    }

    /// The limit the render hit, if it hit one.
    pub(crate) fn refusal(&self) -> Option<String> {
        BUDGET.with(|b| b.borrow().as_ref().and_then(|b| b.refusal.clone()))
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        BUDGET.with(|b| b.borrow_mut().take());
    }
}

/// An error for a limit the template went past, remembered so that the
/// render's error names the limit.
pub(crate) fn refuse(message: impl Into<String>) -> Error {
    let message = message.into();
    BUDGET.with(|b| {
        if let Some(budget) = b.borrow_mut().as_mut() {
            budget.refusal.get_or_insert_with(|| message.clone());
        }
    });
    Error::new(ErrorKind::InvalidOperation, message)
}

/// Spends `units` of the render's work and checks its deadline.
pub(crate) fn charge(units: usize) -> Result<(), Error> {
    let over = BUDGET.with(|b| match b.borrow_mut().as_mut() {
        None => Some("a chat template ran outside a bounded render".to_string()),
        Some(budget) if Instant::now() > budget.deadline => Some(format!(
            "rendering took longer than {} s (MAX_RENDER_TIME)",
            MAX_RENDER_TIME.as_secs()
        )),
        Some(budget) => match budget.work_left.checked_sub(units) {
            Some(left) => {
                budget.work_left = left;
                None
            }
            None => Some(format!(
                "the template made or wrote more than {MAX_RENDER_WORK} bytes in one render (MAX_RENDER_WORK)"
            )),
        },
    });
    match over {
        Some(message) => Err(refuse(message)),
        None => Ok(()),
    }
}

/// The size of `value` in [`MAX_VALUE_SIZE`]'s units; refused past `limit`
/// or [`MAX_VALUE_DEPTH`], after visiting at most `limit` units (lazy
/// sequences are only walked as far as the limit).
pub(crate) fn size_of(value: &Value, limit: usize) -> Result<usize, Error> {
    fn walk(value: &Value, depth: usize, total: &mut usize, limit: usize) -> Result<(), Error> {
        *total += 1;
        if let Some(s) = value.as_str() {
            *total += s.len();
        } else if let Some(bytes) = value.as_bytes() {
            *total += bytes.len();
        } else if matches!(
            value.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
        ) {
            if depth >= MAX_VALUE_DEPTH {
                return Err(refuse(format!(
                    "the template nested lists or maps more than {MAX_VALUE_DEPTH} deep (MAX_VALUE_DEPTH)"
                )));
            }
            if value.len().is_some_and(|n| total.saturating_add(n) > limit) {
                return Err(too_large(limit));
            }
            let is_map = value.kind() == ValueKind::Map;
            for item in value.try_iter()? {
                if is_map {
                    walk(&value.get_item(&item)?, depth + 1, total, limit)?;
                }
                walk(&item, depth + 1, total, limit)?;
            }
        }
        if *total > limit {
            return Err(too_large(limit));
        }
        Ok(())
    }
    let mut total = 0;
    walk(value, 0, &mut total, limit)?;
    Ok(total)
}

fn too_large(limit: usize) -> Error {
    refuse(format!(
        "the template made a value larger than {limit} bytes (MAX_VALUE_SIZE)"
    ))
}

/// Checks and pays for a value the template made.
pub(crate) fn admit(value: &Value) -> Result<(), Error> {
    let size = size_of(value, MAX_VALUE_SIZE)?;
    charge(size)
}

/// Refuses a width or count argument past [`MAX_WIDTH`].
pub(crate) fn width(what: &str, n: usize) -> Result<usize, Error> {
    if n > MAX_WIDTH {
        return Err(refuse(format!(
            "{what} {n} is larger than {MAX_WIDTH} (MAX_WIDTH)"
        )));
    }
    Ok(n)
}

/// Refuses an output of `bytes` past [`MAX_VALUE_SIZE`] before it is made.
pub(crate) fn output(what: &str, bytes: usize) -> Result<(), Error> {
    if bytes > MAX_VALUE_SIZE {
        return Err(refuse(format!(
            "{what} would make {bytes} bytes, more than {MAX_VALUE_SIZE} (MAX_VALUE_SIZE)"
        )));
    }
    Ok(())
}

/// Writes a value the template emits, paying for its text first.
pub(crate) fn format(out: &mut Output, state: &State, value: &Value) -> Result<(), Error> {
    if let Some(s) = value.as_str() {
        charge(s.len())?;
        return minijinja::escape_formatter(out, state, value);
    }
    size_of(value, MAX_VALUE_SIZE)?;
    let mut text = String::new();
    minijinja::escape_formatter(
        &mut minijinja::machinery::make_string_output(&mut text),
        state,
        value,
    )?;
    charge(text.len())?;
    out.write_str(&text).map_err(Error::from)
}

/// What a guard the program runs checks (see [`super::program`]); each is
/// a global under a name no template can write, so none can be shadowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Guard {
    /// After an operation that makes a value: its size and depth, paid for.
    New,
    /// After an operation whose cost grows with its inputs: the deadline.
    Tick,
    /// Before `*`: a string or list repeated past the limit is never made.
    Repeat,
    /// Before assigning to a namespace attribute: the value is copied into
    /// plain lists and maps, so a namespace never holds itself (a cycle
    /// that would recurse without end when shown or compared).
    Assign,
    /// Before raw template text is written: its length, paid for.
    Raw,
}

impl Guard {
    pub(crate) const ALL: [Guard; 5] = [
        Guard::New,
        Guard::Tick,
        Guard::Repeat,
        Guard::Assign,
        Guard::Raw,
    ];

    /// The global's name (`%` never starts an identifier).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Guard::New => "%new",
            Guard::Tick => "%tick",
            Guard::Repeat => "%repeat",
            Guard::Assign => "%assign",
            Guard::Raw => "%raw",
        }
    }
}

impl Object for Guard {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(self: &Arc<Self>, _state: &State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        let arg = |i: usize| {
            args.get(i)
                .ok_or_else(|| Error::from(ErrorKind::MissingArgument))
        };
        match **self {
            Guard::New => {
                admit(arg(0)?)?;
                Ok(arg(0)?.clone())
            }
            Guard::Tick => {
                charge(0)?;
                Ok(arg(0)?.clone())
            }
            Guard::Repeat => {
                let (a, b) = (arg(0)?, arg(1)?);
                repeat(a, b).and_then(|_| repeat(b, a))?;
                Ok(unpacked(a, b))
            }
            Guard::Assign => {
                let settled = settle(arg(0)?, 0)?;
                admit(&settled)?;
                Ok(unpacked(&settled, arg(1)?))
            }
            Guard::Raw => {
                charge(arg(0)?.as_usize().unwrap_or(0))?;
                Ok(Value::UNDEFINED)
            }
        }
    }
}

/// `a` and `b` as the list that minijinja's `UnpackList(2)` puts back on
/// the stack as they were (it leaves the first item on top).
fn unpacked(a: &Value, b: &Value) -> Value {
    Value::from(vec![b.clone(), a.clone()])
}

/// Refuses `what * times` when `what` is a string or list that would grow
/// past [`MAX_VALUE_SIZE`].
fn repeat(what: &Value, times: &Value) -> Result<(), Error> {
    let Some(n) = times.as_usize() else {
        return Ok(());
    };
    let len = match what.as_str() {
        Some(s) => s.len(),
        None if matches!(what.kind(), ValueKind::Seq | ValueKind::Iterable) => {
            what.len().unwrap_or(0)
        }
        None => return Ok(()),
    };
    output("repeating a string or list", len.saturating_mul(n))
}

/// `value` as plain data: lists, maps and scalars copied out of any lazy
/// sequence, namespace or loop, so that what a namespace holds never leads
/// back to a namespace. Macros and other callables stay as they are (they
/// are shown by name, never walked).
fn settle(value: &Value, depth: usize) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => {}
        _ => return Ok(value.clone()),
    }
    if depth >= MAX_VALUE_DEPTH {
        return Err(refuse(format!(
            "the template nested lists or maps more than {MAX_VALUE_DEPTH} deep (MAX_VALUE_DEPTH)"
        )));
    }
    if value.len().is_some_and(|n| n > MAX_VALUE_SIZE) {
        return Err(too_large(MAX_VALUE_SIZE));
    }
    charge(value.len().unwrap_or(1))?;
    if value.kind() == ValueKind::Map {
        let mut pairs = Vec::new();
        for key in value.try_iter()? {
            let item = settle(&value.get_item(&key)?, depth + 1)?;
            pairs.push((settle(&key, depth + 1)?, item));
        }
        Ok(Value::from_iter(pairs))
    } else {
        let mut items = Vec::new();
        for item in value.try_iter()? {
            items.push(settle(&item, depth + 1)?);
            if items.len() > MAX_VALUE_SIZE {
                return Err(too_large(MAX_VALUE_SIZE));
            }
        }
        Ok(Value::from(items))
    }
}
