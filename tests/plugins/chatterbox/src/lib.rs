//! Writes to stdout and stderr on every call: a little usually, 2 MiB when
//! asked to judge "flood", and panics after its chatter on "panic".
use std::io::Write;
use verifine_plugin_api::*;

pub struct Chatterbox;

impl Rubric for Chatterbox {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-chatterbox", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let line = format!("chatter from sample {} {}\n", sample.id, "-".repeat(1000));
        print!("{line}");
        eprint!("{line}");
        match sample.response.as_str() {
            "flood" => {
                let block = vec![b'x'; 1 << 20];
                for _ in 0..2 {
                    std::io::stdout()
                        .write_all(&block)
                        .map_err(|e| e.to_string())?;
                    std::io::stderr()
                        .write_all(&block)
                        .map_err(|e| e.to_string())?;
                }
            }
            "panic" => panic!("deliberate panic on sample {}", sample.id),
            _ => {}
        }
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(rubric: Chatterbox);
