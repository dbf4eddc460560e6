//! What the server reads and refuses at start: one config file for the
//! scoring and server tables, and limits no request could ever fit.

use super::{options, post};
use serde_json::json;
use std::time::Duration;
use verifine_runtime::Limits;
use verifine_serve::{ConnectionLimits, RequestLimits, ServeOptions};
use verifine_tests::scratch_dir;

#[test]
fn the_command_reads_score_tables_and_the_server_tables_from_one_file() {
    use verifine::commands::serve::{ServeArgs, bind};
    let dir = scratch_dir("serve-config");
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        r#"
[rubric]
plugin = "math-answer"
config = { format_weight = 0.5, correct_weight = 0.5 }

[serve]
on_failure = "error"
workers = 1
max_in_flight = 4

[hot_swap]
keep_revisions = 2
"#,
    )
    .unwrap();
    let args = ServeArgs {
        rubric: None,
        aggregator: None,
        config: Some(config.clone()),
        host: "127.0.0.1".parse().unwrap(),
        port: 0,
        token: None,
        dir: dir.join("serve"),
        judges: None,
        allow_native: false,
    };
    let server = bind(&args).unwrap().spawn();
    let (status, body, _) = post(
        &server,
        "/get_reward",
        &json!({"query": ["A: 41"], "labels": ["42"]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body["rewards"],
        json!([0.5]),
        "the rubric's own table applies"
    );
    let (status, _, _) = post(&server, "/get_reward", &json!({"query": ["A: 41"]}));
    assert_eq!(status, 422, "[serve] on_failure = \"error\" applies");
    server.stop().unwrap();
    assert!(
        dir.join("serve").join("config.toml").exists(),
        "promote's marker"
    );

    std::fs::write(&config, "[serve]\nworkerz = 2\n").unwrap();
    let error = format!("{:#}", bind(&args).err().unwrap());
    assert!(
        error.contains("serve.toml") && error.contains("workerz"),
        "{error}"
    );
    let error = format!(
        "{:#}",
        bind(&ServeArgs {
            config: None,
            ..args.clone()
        })
        .err()
        .unwrap()
    );
    assert!(error.contains("no rubric"), "{error}");
}

#[test]
fn budgets_no_request_could_fit_are_refused_at_start() {
    let dir = scratch_dir("serve-impossible-budgets");
    for (limits, named) in [
        (
            RequestLimits {
                max_samples_per_request: 100,
                max_samples_in_flight: 99,
                ..RequestLimits::default()
            },
            "max_samples_in_flight",
        ),
        (
            RequestLimits {
                max_body_bytes_in_flight: 1024,
                ..RequestLimits::default()
            },
            "max_body_bytes_in_flight",
        ),
        (
            RequestLimits {
                connections: ConnectionLimits {
                    header_timeout: Duration::ZERO,
                    ..ConnectionLimits::default()
                },
                ..RequestLimits::default()
            },
            "header_timeout_ms",
        ),
    ] {
        let options = ServeOptions {
            limits,
            ..options("math-answer", &dir)
        };
        let runtime = verifine_runtime::Runtime::new(Limits::default()).unwrap();
        let refused = verifine_serve::Server::bind(options, runtime)
            .err()
            .expect("refused");
        assert!(refused.to_string().contains(named), "{refused}");
    }
}
