//! Checking a rubric's packed answer (`list<result<judgment, string>>` in
//! postcard) once, in place. The answer comes from the sandbox, so every
//! length is checked against the bytes left and every string's UTF-8 is
//! checked; what does not decode is named by its offset. What a check
//! keeps is where each judgment's parts lie ([`Layout`]), so the host reads
//! judgments where they are ([`crate::judgments`]) and copies only what it
//! keeps. Decoding through serde did the same work through a visitor per
//! field, a fifth of the crossing's time (BENCHMARKS.md).

/// Where a list's items start in the answer, and how many there are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) at: usize,
    pub(crate) count: usize,
}

/// Where one judgment's parts lie in a checked answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) total: Option<f64>,
    pub(crate) verdicts: Span,
    pub(crate) sub_scores: Span,
    pub(crate) criteria: Span,
    /// The explanation's bytes (start, end), when there is one.
    pub(crate) explanation: Option<(usize, usize)>,
}

/// One result of a checked answer: a judgment's layout, or the byte range
/// of the rubric's error message.
pub(crate) type Entry = Result<Layout, (usize, usize)>;

/// Checks a packed answer whole and returns where each result lies, or
/// where and why it does not decode.
pub(crate) fn check(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    results(bytes, Reader::judgment, Reader::text_range)
}

/// Every result of a packed answer, each judgment read by `judgment` and
/// each error by `error`; nothing may follow the last.
pub(crate) fn results<'a, J, E>(
    bytes: &'a [u8],
    mut judgment: impl FnMut(&mut Reader<'a>) -> Result<J, Malformed>,
    mut error: impl FnMut(&mut Reader<'a>) -> Result<E, Malformed>,
) -> Result<Vec<Result<J, E>>, String> {
    let mut reader = Reader::new(bytes, 0);
    let results = reader
        .list(|r| match r.varint()? {
            0 => judgment(r).map(Ok),
            1 => error(r).map(Err),
            _ => Err(r.fail("a result tag other than 0 or 1")),
        })
        .and_then(|results| match reader.at == bytes.len() {
            true => Ok(results),
            false => Err(reader.fail("bytes after the last result")),
        });
    results.map_err(|Malformed| reader.failure())
}

/// An answer stopped decoding; the reader that stopped keeps where and
/// why ([`Reader::failure`]). Carrying nothing keeps every read's result
/// small enough to come back in registers on the path that succeeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Malformed;

/// `bytes` as text, if they are UTF-8. Nearly every string a rubric
/// answers (criterion ids, explanations) is ASCII, which is checked many
/// bytes a step inline before the general check is called.
#[inline]
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// A verdict's criterion, score, met, confidence and explanation.
pub(crate) type VerdictFields<'a> = (&'a str, f64, Option<bool>, Option<f64>, Option<&'a str>);

/// A cursor over answer bytes. Reading a checked answer again cannot fail;
/// the view's accessors say so where they unwrap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Where and why reading stopped, once it has.
    stopped: Option<(usize, &'static str)>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], at: usize) -> Self {
        Reader {
            bytes,
            at,
            stopped: None,
        }
    }

    /// The whole answer this reader walks.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Stops reading here for `reason`.
    #[cold]
    fn fail(&mut self, reason: &'static str) -> Malformed {
        self.stopped = Some((self.at, reason));
        Malformed
    }

    /// Where and why reading stopped, as the host reports it.
    pub(crate) fn failure(&self) -> String {
        let (at, reason) = self.stopped.unwrap_or((self.at, "an unknown failure"));
        format!("byte {at}: {reason}")
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.fail("the answer ends early"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    /// A LEB128 varint of at most ten bytes that fits a `usize`.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<usize, Malformed> {
        let mut at = self.at;
        let value = verifine_contract::wire::varint(self.bytes, &mut at);
        self.at = at;
        value.map_err(|reason| self.fail(reason))
    }

    /// A list's count; one larger than the bytes left could hold (every
    /// item takes one at least) is refused before anything is reserved.
    pub(crate) fn count(&mut self) -> Result<usize, Malformed> {
        let count = self.varint()?;
        if count > self.bytes.len() - self.at {
            return Err(self.fail("a count larger than the answer can hold"));
        }
        Ok(count)
    }

    /// A list's items, each read by `item`.
    pub(crate) fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Vec<T>, Malformed> {
        let count = self.count()?;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// A list's count and where its items start, its items checked and skipped.
    fn span(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), Malformed>,
    ) -> Result<Span, Malformed> {
        let count = self.count()?;
        let at = self.at;
        for _ in 0..count {
            item(self)?;
        }
        Ok(Span { at, count })
    }

    /// A string, its UTF-8 checked.
    #[inline]
    pub(crate) fn text(&mut self) -> Result<&'a str, Malformed> {
        let len = self.varint()?;
        let start = self.at;
        let bytes = self.take(len)?;
        utf8(bytes).ok_or_else(|| {
            self.at = start;
            self.fail("a string that is not UTF-8")
        })
    }

    /// A string's byte range, its UTF-8 checked.
    fn text_range(&mut self) -> Result<(usize, usize), Malformed> {
        let text = self.text()?;
        Ok((self.at - text.len(), self.at))
    }

    #[inline]
    pub(crate) fn f64(&mut self) -> Result<f64, Malformed> {
        let bytes: [u8; 8] = self.take(8)?.try_into().expect("eight bytes");
        Ok(f64::from_le_bytes(bytes))
    }

    #[inline]
    pub(crate) fn option<T>(
        &mut self,
        value: impl FnOnce(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Option<T>, Malformed> {
        match self.byte()? {
            0 => Ok(None),
            1 => value(self).map(Some),
            _ => {
                self.at -= 1;
                Err(self.fail("an option tag other than 0 or 1"))
            }
        }
    }

    #[inline]
    pub(crate) fn bool(&mut self) -> Result<bool, Malformed> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => {
                self.at -= 1;
                Err(self.fail("a bool other than 0 or 1"))
            }
        }
    }

    /// A verdict's fields, in the contract's order.
    pub(crate) fn verdict(&mut self) -> Result<VerdictFields<'a>, Malformed> {
        Ok((
            self.text()?,
            self.f64()?,
            self.option(Self::bool)?,
            self.option(Self::f64)?,
            self.option(Self::text)?,
        ))
    }

    /// A sub-score's name and value.
    pub(crate) fn sub_score(&mut self) -> Result<(&'a str, f64), Malformed> {
        Ok((self.text()?, self.f64()?))
    }

    /// A criterion's id, description, weight and dimension; its tags
    /// follow (a list of strings) and are left to the caller.
    pub(crate) fn criterion_head(&mut self) -> Result<(&'a str, &'a str, f64, &'a str), Malformed> {
        Ok((self.text()?, self.text()?, self.f64()?, self.text()?))
    }

    /// Skips a list of strings, checking each; returns where it starts.
    pub(crate) fn texts(&mut self) -> Result<Span, Malformed> {
        self.span(|r| r.text_range().map(drop))
    }

    fn judgment(&mut self) -> Result<Layout, Malformed> {
        Ok(Layout {
            total: self.option(Self::f64)?,
            verdicts: self.span(|r| r.verdict().map(drop))?,
            sub_scores: self.span(|r| r.sub_score().map(drop))?,
            criteria: self.span(|r| {
                r.criterion_head()?;
                r.texts().map(drop)
            })?,
            explanation: self.option(Self::text_range)?,
        })
    }
}
