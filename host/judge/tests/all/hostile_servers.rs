//! The HTTP judge against servers and caches that try to harm the host:
//! an endless answer body, a `Retry-After` of an hour, an answer that
//! never comes, a redirect to another origin, concurrent scorers racing a
//! one-call budget, and planted cache entries. Each is contained (memory,
//! time, calls counted by the server, trust), and a good query still works
//! afterwards.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use verifine_judge::cache::DiskCache;
use verifine_judge::scripted_server::{Reply, completion, serve};
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::judge_models::{JudgeModels, ModelError, ModelRequest};

/// One judge named `judge` at `url`: `backend` adds to its backend table,
/// `judge` adds lines to the judge's table.
fn judge_at(url: &str, backend: &str, judge: &str, cache: Option<&Path>) -> Judges {
    let cache = cache.map_or(String::new(), |d| format!("cache_dir = {d:?}\n"));
    let text = format!(
        "{cache}[judges.judge]\n\
         backend = {{ kind = \"openai-http\", base_url = \"{url}\", model = \"m\" {backend} }}\n\
         {judge}\n"
    );
    Judges::new(&JudgesConfig::parse(&text, "hostile.toml").unwrap()).unwrap()
}

/// One judge at `url` with `backend` added to its backend table, no
/// budget and no cache.
fn http_judge(url: &str, backend: &str) -> Judges {
    judge_at(url, backend, "", None)
}

fn ask(judges: &Judges, prompt: &str) -> Result<String, String> {
    let answer = judges
        .ask("p", &[ModelRequest::new(prompt, 4)])
        .remove(0)
        .map_err(|e| e.to_string())?;
    Ok(answer.text)
}

/// Asks `prompt`, expecting a failure within `limit`; the failure.
fn fails_within(judges: &Judges, prompt: &str, limit: Duration) -> String {
    let started = Instant::now();
    let err = ask(judges, prompt).unwrap_err();
    let took = started.elapsed();
    assert!(took < limit, "took {took:?}: {err}");
    err
}

fn requests(server: &verifine_judge::scripted_server::Server) -> usize {
    server.received.lock().unwrap().len()
}

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("hostile-{name}"))
}

#[test]
fn an_endless_answer_is_refused_at_the_cap_and_not_read_further() {
    let server = serve(|n, _| match n {
        0 => Reply::Flood(None),
        1 => Reply::Flood(Some(3 << 30)),
        _ => completion("YES"),
    });
    let small_cap = http_judge(&server.url, ", retries = 3, max_response_bytes = 65536");
    let started = Instant::now();
    let err = ask(&small_cap, "q").unwrap_err();
    assert!(
        err.contains("over max_response_bytes = 65536; not read further")
            && err.contains("after 1 attempt)"),
        "{err}"
    );
    // A declared 3 GiB body is refused before any of it is read, with
    // the default cap of 4 MiB.
    let default_cap = http_judge(&server.url, "");
    let err = ask(&default_cap, "q").unwrap_err();
    assert!(
        err.contains("3221225472 bytes, over max_response_bytes = 4194304; not read"),
        "{err}"
    );
    // The server could write no more than the sockets buffer before the
    // client hung up: nothing near the gigabytes it offered was read.
    let written = server
        .flood_bytes_written
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(written < 32 << 20, "{written} bytes written");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(requests(&server), 2, "a refused answer is not retried");
    assert_eq!(ask(&small_cap, "q").unwrap(), "YES");
}

#[test]
fn an_hour_long_retry_after_ends_the_query_at_once() {
    let server = serve(|n, _| match n {
        0 => Reply::Status(429, Some(3600)),
        _ => completion("YES"),
    });
    let judges = http_judge(&server.url, ", retries = 3, query_deadline_seconds = 5");
    let err = fails_within(&judges, "q", Duration::from_secs(2));
    assert!(
        err.contains("HTTP 429")
            && err.contains("not retried: waiting 300.0 s would pass the query's deadline"),
        "{err}"
    );
    assert_eq!(requests(&server), 1);
    assert_eq!(ask(&judges, "q").unwrap(), "YES");
}

#[test]
fn retries_stop_at_the_query_deadline() {
    // Backoffs of 200 ms doubling, twenty retries allowed: the deadline of
    // one second, not the retry count, ends the query.
    let server = serve(|_, _| Reply::Status(503, None));
    let judges = http_judge(
        &server.url,
        ", retries = 20, backoff_ms = 200, query_deadline_seconds = 1",
    );
    let err = fails_within(&judges, "q", Duration::from_millis(2500));
    // Ended by the deadline either in a backoff ("waiting … would pass the
    // query's deadline") or in an attempt cut short at it ("timed out at
    // the query's deadline"), whichever the machine's timing gives.
    assert!(err.contains("the query's deadline"), "{err}");
    assert!(
        (2..=4).contains(&requests(&server)),
        "{}",
        requests(&server)
    );
}

#[test]
fn a_silent_server_is_left_at_the_query_or_the_callers_deadline() {
    let server = serve(|_, body| {
        if body["messages"][0]["content"] == "slow" {
            Reply::After(Duration::from_secs(5), Box::new(completion("late")))
        } else {
            completion("YES")
        }
    });
    // The per-attempt timeout is a minute; the query has half a second.
    let judges = http_judge(&server.url, ", query_deadline_seconds = 0.5");
    let err = fails_within(&judges, "slow", Duration::from_millis(1500));
    assert!(
        err.contains("timed out at the query's deadline (0.5 s)"),
        "{err}"
    );
    // With the default deadline, a caller's own earlier one wins.
    let judges = http_judge(&server.url, "");
    let started = Instant::now();
    let slow = [ModelRequest::new("slow", 4)];
    let deadline = started + Duration::from_millis(300);
    let err = judges
        .ask_before("p", &slow, deadline)
        .remove(0)
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(1300), "{err}");
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("timed out at the query's deadline (0.3 s)")),
        "{err}"
    );
    // A deadline already past sends nothing and spends no call.
    let fast = [ModelRequest::new("fast", 4)];
    let err = judges.ask_before("p", &fast, Instant::now()).remove(0);
    assert!(matches!(err.unwrap_err(), ModelError::Transport(m) if m.contains("not sent")));
    assert_eq!(requests(&server), 2);
    assert_eq!(judges.ledgers()["judge"].calls, 1);
    assert_eq!(ask(&judges, "fast").unwrap(), "YES");
}

#[test]
fn a_redirect_to_another_origin_is_refused_and_nothing_is_cached() {
    let elsewhere = serve(|_, _| completion("NO"));
    let target = format!("{}/chat/completions", elsewhere.url);
    let origin = serve(move |n, _| match n {
        0 => Reply::Redirect(target.clone()),
        1 => Reply::Redirect("/v1/moved/chat/completions".into()),
        _ => completion("YES"),
    });
    let dir = scratch("redirect");
    let judges = judge_at(&origin.url, ", retries = 3", "", Some(&dir));
    let err = ask(&judges, "q").unwrap_err();
    assert!(
        err.contains("refused a redirect to another origin") && err.contains("after 1 attempt)"),
        "{err}"
    );
    assert_eq!(requests(&elsewhere), 0, "the prompt went elsewhere");
    // A redirect within the origin is followed, and its answer is the
    // one cached: the other origin's "NO" is never seen.
    let answer = judges.ask("p", &[ModelRequest::new("q", 4)]).remove(0);
    let answer = answer.unwrap();
    assert_eq!((answer.text.as_str(), answer.cached), ("YES", false));
    let moved = origin.received.lock().unwrap()[2].head.clone();
    assert!(
        moved.starts_with("POST /v1/moved/chat/completions"),
        "{moved}"
    );
    let again = judges.ask("p", &[ModelRequest::new("q", 4)]).remove(0);
    assert!(again.unwrap().cached);
    assert_eq!(requests(&elsewhere), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn max_calls_holds_across_threads_and_counts_every_retry() {
    // Three scorers at once against a one-call budget: one call is sent.
    let slow = serve(|_, _| Reply::After(Duration::from_millis(200), Box::new(completion("YES"))));
    let judges = Arc::new(judge_at(&slow.url, "", "budget = { max_calls = 1 }", None));
    let start = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let (judges, start) = (judges.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                ask(&judges, &format!("q{i}"))
            })
        })
        .collect();
    let answers: Vec<Result<String, String>> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        answers.iter().filter(|a| a.is_ok()).count(),
        1,
        "{answers:?}"
    );
    assert_eq!(requests(&slow), 1);
    assert_eq!(judges.ledgers()["judge"].calls, 1);

    // A query admitted with calls left retries only while calls remain,
    // and failed attempts stay spent.
    let failing = serve(|_, _| Reply::Status(503, Some(0)));
    let judges = judge_at(
        &failing.url,
        ", retries = 10",
        "budget = { max_calls = 3 }",
        None,
    );
    let err = ask(&judges, "q").unwrap_err();
    assert!(
        err.contains("not retried: budget exhausted: 3 calls of max_calls 3")
            && err.contains("after 3 attempts"),
        "{err}"
    );
    assert!(ask(&judges, "q2").unwrap_err().contains("budget exhausted"));
    assert_eq!(requests(&failing), 3);
    let ledger = judges.ledgers()["judge"];
    assert_eq!((ledger.calls, ledger.failures), (3, 2));

    // A budget with room for the retry gets its answer.
    let flaky = serve(|n, _| match n {
        0 => Reply::Status(503, Some(0)),
        _ => completion("YES"),
    });
    let judges = judge_at(&flaky.url, "", "budget = { max_calls = 2 }", None);
    assert_eq!(ask(&judges, "q").unwrap(), "YES");
    assert_eq!(judges.ledgers()["judge"].calls, 2);
}

/// A stored answer with `text`, as the cache keeps its JSON.
fn planted_answer(text: &str) -> Vec<u8> {
    serde_json::json!({
        "text": text, "logprobs": [], "model": "m", "seconds": 0.0, "cached": false,
        "usage": {"input": 0, "cached_input": 0, "output": 0},
    })
    .to_string()
    .into_bytes()
}

#[test]
fn a_forged_or_copied_cache_entry_is_a_miss_and_is_overwritten() {
    let server = serve(|_, body| {
        let right = body["messages"][0]["content"] == "is it right?";
        completion(if right { "YES" } else { "NO" })
    });
    let dir = scratch("forged");
    let judges = judge_at(&server.url, "", "", Some(&dir));
    let cache = DiskCache::open(dir.to_path_buf()).unwrap();
    let question = ModelRequest::new("is it right?", 4);
    let key = DiskCache::key(&server.url, "m", &question);
    // A planted verdict "NO" under a made-up tag.
    let entry = cache.path(&key);
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::write(&entry, [vec![0u8; 32], planted_answer("NO")].concat()).unwrap();
    let answer = judges.ask("p", std::slice::from_ref(&question)).remove(0);
    let answer = answer.unwrap();
    assert_eq!((answer.text.as_str(), answer.cached), ("YES", false));
    assert_eq!(requests(&server), 1);
    // Overwritten with a signed entry, which a new process trusts.
    let again = judge_at(&server.url, "", "", Some(&dir));
    let hit = again.ask("p", &[question]).remove(0).unwrap();
    assert!(hit.cached && hit.text == "YES");
    assert_eq!(requests(&server), 1);
    // A signed entry copied under another question does not answer it.
    let other = ModelRequest::new("is it wrong?", 4);
    let copy = cache.path(&DiskCache::key(&server.url, "m", &other));
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&entry, &copy).unwrap();
    let answer = again.ask("p", &[other]).remove(0).unwrap();
    assert_eq!((answer.text.as_str(), answer.cached), ("NO", false));
    assert_eq!(requests(&server), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_cache_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let server = serve(|_, _| completion("YES"));
    let dir = scratch("shared");
    let question = ModelRequest::new("is it right?", 4);
    // An entry that verifies, saying "NO", in a directory anyone may
    // write: nothing in it can be trusted, signed or not.
    let cache = DiskCache::open(dir.to_path_buf()).unwrap();
    let key = DiskCache::key(&server.url, "m", &question);
    let planted: verifine_runtime::ModelAnswer =
        serde_json::from_slice(&planted_answer("NO")).unwrap();
    cache.put(&key, &planted);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let judges = judge_at(&server.url, "", "", Some(&dir));
    for asked in 1..=2 {
        let answer = judges.ask("p", std::slice::from_ref(&question)).remove(0);
        let answer = answer.unwrap();
        assert_eq!((answer.text.as_str(), answer.cached), ("YES", false));
        assert_eq!(requests(&server), asked);
    }
    // Made private again, the cache is used again.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let judges = judge_at(&server.url, "", "", Some(&dir));
    assert_eq!(ask(&judges, "a new question").unwrap(), "YES");
    let hit = judges.ask("p", &[ModelRequest::new("a new question", 4)]);
    assert!(hit[0].as_ref().unwrap().cached);
    assert_eq!(requests(&server), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
