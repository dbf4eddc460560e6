//! Distillation: the student learns the teacher's per-criterion verdicts
//! with equal-weight binary cross-entropy over the criteria a pair has a
//! verdict on; the gate criterion's targets are smoothed by 0.1 (a gate
//! decides a whole total, so overconfidence there costs most).

use super::{StudentError, StudentModel, StudentSpec, features};
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use verifine_base::SplitMix64;

/// Label smoothing on the gate criterion.
pub const GATE_SMOOTHING: f64 = 0.1;

/// One teacher-labelled pair.
#[derive(Debug, Clone)]
pub struct Example {
    /// The task.
    pub prompt: String,
    /// The response the teacher judged.
    pub response: String,
    /// The teacher's verdict per criterion (spec order), `None` where it gave none.
    pub labels: Vec<Option<bool>>,
}

/// How to train.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Passes over the training pairs.
    pub epochs: usize,
    /// AdamW's learning rate.
    pub learning_rate: f64,
    /// Pairs per update.
    pub batch_size: usize,
    /// Seeds the initial weights and the order of pairs.
    pub seed: u64,
}

type Result<T> = std::result::Result<T, StudentError>;

fn e(err: candle_core::Error) -> StudentError {
    StudentError::Tensor(err)
}

/// Trains a student of `spec` on `examples`; returns it with the mean loss
/// of each epoch.
pub fn train(
    spec: StudentSpec,
    examples: &[Example],
    settings: Settings,
) -> Result<(StudentModel, Vec<f64>)> {
    let k = spec.criteria.len();
    if k == 0 || examples.is_empty() {
        return Err(StudentError::Examples(format!(
            "nothing to learn: {k} criteria, {} pairs",
            examples.len()
        )));
    }
    if let Some(bad) = examples.iter().find(|x| x.labels.len() != k) {
        return Err(StudentError::Examples(format!(
            "a pair has {} labels for {k} criteria",
            bad.labels.len()
        )));
    }
    let gate = spec
        .gate
        .as_ref()
        .map(|g| {
            spec.criteria
                .iter()
                .position(|(id, _)| id == g)
                .ok_or_else(|| {
                    StudentError::Examples(format!("the gate {g:?} is none of the criteria"))
                })
        })
        .transpose()?;
    let varmap = VarMap::new();
    let vars = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = StudentModel::new(spec.clone(), vars).map_err(e)?;
    seed_weights(&varmap, settings.seed)?;
    let mut optimizer = candle_nn::AdamW::new(
        varmap.all_vars(),
        candle_nn::ParamsAdamW {
            lr: settings.learning_rate,
            weight_decay: 1e-4,
            ..Default::default()
        },
    )
    .map_err(e)?;
    let features: Vec<Vec<f32>> = examples
        .iter()
        .map(|x| features::featurize(&x.prompt, &x.response, spec.buckets))
        .collect();
    let mut rng = SplitMix64::new(settings.seed ^ 0x5757);
    let mut order: Vec<usize> = (0..examples.len()).collect();
    let mut losses = Vec::with_capacity(settings.epochs);
    for _ in 0..settings.epochs {
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let (mut sum, mut batches) = (0.0, 0);
        for batch in order.chunks(settings.batch_size.max(1)) {
            let loss = batch_loss(&model, &features, examples, batch, gate, k)?;
            optimizer.backward_step(&loss).map_err(e)?;
            sum += f64::from(loss.to_scalar::<f32>().map_err(e)?);
            batches += 1;
        }
        losses.push(sum / batches as f64);
    }
    Ok((model, losses))
}

/// Masked, equal-weight BCE over the batch's labelled (pair, criterion)s,
/// computed stably from logits: max(x, 0) − x·y + ln(1 + e^−|x|).
fn batch_loss(
    model: &StudentModel,
    features: &[Vec<f32>],
    examples: &[Example],
    batch: &[usize],
    gate: Option<usize>,
    k: usize,
) -> Result<Tensor> {
    let buckets = model.spec.buckets;
    let x: Vec<f32> = batch
        .iter()
        .flat_map(|&i| features[i].iter().copied())
        .collect();
    let mut targets = Vec::with_capacity(batch.len() * k);
    let mut mask = Vec::with_capacity(batch.len() * k);
    for &i in batch {
        for (c, label) in examples[i].labels.iter().enumerate() {
            let y = label.map_or(0.0, |b| if b { 1.0 } else { 0.0 });
            let y = if Some(c) == gate {
                y * (1.0 - GATE_SMOOTHING) + GATE_SMOOTHING / 2.0
            } else {
                y
            };
            targets.push(y as f32);
            mask.push(if label.is_some() { 1f32 } else { 0.0 });
        }
    }
    let n = batch.len();
    let x = Tensor::from_vec(x, (n, buckets), &Device::Cpu).map_err(e)?;
    let y = Tensor::from_vec(targets, (n, k), &Device::Cpu).map_err(e)?;
    let m = Tensor::from_vec(mask, (n, k), &Device::Cpu).map_err(e)?;
    let logits = model.logits(&x).map_err(e)?;
    let per = (logits.relu().map_err(e)? - (&logits * &y).map_err(e)?).map_err(e)?;
    let soft = logits
        .abs()
        .and_then(|a| a.neg())
        .and_then(|a| a.exp())
        .and_then(|a| a + 1.0)
        .and_then(|a| a.log())
        .map_err(e)?;
    let per = ((per + soft).map_err(e)? * &m).map_err(e)?;
    let labelled = m
        .sum_all()
        .and_then(|s| s.to_scalar::<f32>())
        .map_err(e)?
        .max(1.0);
    (per.sum_all().map_err(e)? / f64::from(labelled)).map_err(e)
}

/// Replaces candle's random initialisation with a seeded one (uniform in
/// ±1/√fan_in for weights, zero biases), so a distillation is reproducible.
fn seed_weights(varmap: &VarMap, seed: u64) -> Result<()> {
    let data = varmap
        .data()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut names: Vec<&String> = data.keys().collect();
    names.sort();
    let mut rng = SplitMix64::new(seed);
    for name in names {
        let var: &Var = &data[name];
        let dims = var.dims().to_vec();
        let count: usize = dims.iter().product();
        let values: Vec<f32> = if name.ends_with("bias") {
            vec![0.0; count]
        } else {
            let bound = 1.0 / (*dims.last().unwrap_or(&1) as f32).sqrt();
            (0..count)
                .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * bound)
                .collect()
        };
        var.set(&Tensor::from_vec(values, dims, &Device::Cpu).map_err(e)?)
            .map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "polite" is met when the response says please; "gate" when it ends
    /// with a marked answer. Both are readable from the text, so a student
    /// must learn them; the gate's targets are smoothed, so its
    /// probabilities stay near 0.05 / 0.95 while the other's go further.
    fn examples(n: usize) -> Vec<Example> {
        let mut rng = SplitMix64::new(7);
        (0..n)
            .map(|i| {
                let polite = rng.next_u64().is_multiple_of(2);
                let marked = rng.next_u64().is_multiple_of(2);
                let mut response = format!("step {i} adds {} and {}", i % 7, i % 5);
                if polite {
                    response = format!("please note: {response}");
                }
                if marked {
                    response += "\n#### 12";
                }
                Example {
                    prompt: format!("problem {}", i % 11),
                    response,
                    labels: vec![Some(polite), Some(marked)],
                }
            })
            .collect()
    }

    fn spec() -> StudentSpec {
        StudentSpec {
            criteria: vec![
                ("polite".into(), "says please".into()),
                ("gate".into(), "marks its answer".into()),
            ],
            gate: Some("gate".into()),
            buckets: 512,
            hidden: 16,
        }
    }

    #[test]
    fn a_student_learns_readable_criteria_and_the_gate_stays_smoothed() {
        let all = examples(240);
        let (train_set, heldout) = all.split_at(200);
        let settings = Settings {
            epochs: 60,
            learning_rate: 0.02,
            batch_size: 32,
            seed: 1,
        };
        let (model, losses) = train(spec(), train_set, settings).unwrap();
        assert!(losses.last().unwrap() < &(losses[0] * 0.5), "{losses:?}");
        let pairs: Vec<(&str, &str)> = heldout
            .iter()
            .map(|x| (x.prompt.as_str(), x.response.as_str()))
            .collect();
        let p = model.predict(&pairs).unwrap();
        for c in 0..2 {
            let right = heldout
                .iter()
                .zip(&p)
                .filter(|(x, p)| x.labels[c] == Some(p[c] >= verifine_base::PASS_MARK))
                .count();
            assert!(right >= 38, "criterion {c}: {right} of 40 right");
        }
        // On the pairs it was fit to, the gate's confidence sits near the
        // smoothed targets' 0.95; the other criterion's goes past it.
        let fitted: Vec<(&str, &str)> = train_set
            .iter()
            .map(|x| (x.prompt.as_str(), x.response.as_str()))
            .collect();
        let q = model.predict(&fitted).unwrap();
        let confidence =
            |c: usize| q.iter().map(|row| row[c].max(1.0 - row[c])).sum::<f64>() / q.len() as f64;
        assert!(
            confidence(1) < 0.96,
            "the gate is smoothed: {}",
            confidence(1)
        );
        assert!(
            confidence(0) > confidence(1) + 0.01,
            "the other is not: {}",
            confidence(0)
        );
        // The same seed trains the same student.
        let (again, _) = train(spec(), train_set, settings).unwrap();
        assert_eq!(again.predict(&pairs).unwrap(), p);
    }

    #[test]
    fn a_student_survives_save_and_load() {
        let all = examples(40);
        let settings = Settings {
            epochs: 2,
            learning_rate: 0.01,
            batch_size: 8,
            seed: 3,
        };
        let (model, _) = train(spec(), &all, settings).unwrap();
        let dir = verifine_test_support::scratch_path("student");
        model.save(&dir).unwrap();
        let loaded = StudentModel::load(&dir).unwrap();
        let pairs = [("problem 1", "please #### 12")];
        assert_eq!(
            loaded.predict(&pairs).unwrap(),
            model.predict(&pairs).unwrap()
        );
        assert_eq!(loaded.spec, model.spec);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
