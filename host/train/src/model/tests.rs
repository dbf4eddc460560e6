//! The decoder: gradients everywhere, cached decoding, padding, seeding.

use super::test_models::flat_values;
use super::*;

fn tiny() -> (VarMap, Decoder) {
    let varmap = VarMap::new();
    let model = Decoder::new(ModelConfig::tiny(11), &varmap, &Device::Cpu).unwrap();
    (varmap, model)
}

fn ids(rows: &[&[u32]]) -> Tensor {
    let data: Vec<u32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    Tensor::from_vec(data, (rows.len(), rows[0].len()), &Device::Cpu).unwrap()
}

fn loss(model: &Decoder, input: &Tensor, targets: &Tensor) -> Tensor {
    let logits = model.forward(input, None).unwrap();
    token_log_probs(&logits, targets)
        .unwrap()
        .mean_all()
        .unwrap()
        .neg()
        .unwrap()
}

#[test]
fn every_variable_receives_a_gradient() {
    let (varmap, model) = tiny();
    let input = ids(&[&[1, 2, 3, 4], &[5, 6, 7, 8]]);
    let targets = ids(&[&[2, 3, 4, 5], &[6, 7, 8, 9]]);
    let grads = loss(&model, &input, &targets).backward().unwrap();
    for (name, var) in sorted_vars(&varmap) {
        let grad = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("no gradient for {name}"));
        let norm = grad
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            norm > 0.0 && norm.is_finite(),
            "{name}: gradient norm {norm}"
        );
    }
}

#[test]
fn gradients_match_finite_differences() {
    let (varmap, model) = tiny();
    let input = ids(&[&[1, 2, 3, 4, 5]]);
    let targets = ids(&[&[2, 3, 4, 5, 6]]);
    let grads = loss(&model, &input, &targets).backward().unwrap();
    let eps = 1e-2f32;
    for (name, var) in sorted_vars(&varmap) {
        let analytic = flat_values(grads.get(var.as_tensor()).unwrap());
        let original = flat_values(var.as_tensor());
        // Probe the coordinate with the largest gradient of each variable.
        let (at, g) = analytic
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap();
        let probe = |delta: f32| {
            let mut values = original.clone();
            values[at] += delta;
            let t = Tensor::from_vec(values, var.shape(), &Device::Cpu).unwrap();
            var.set(&t).unwrap();
            loss(&model, &input, &targets).to_scalar::<f32>().unwrap()
        };
        let numeric = (probe(eps) - probe(-eps)) / (2.0 * eps);
        probe(0.0);
        let tolerance = 1e-3 + 0.05 * g.abs();
        assert!(
            (numeric - g).abs() < tolerance,
            "{name}[{at}]: analytic {g}, numeric {numeric}"
        );
    }
}

#[test]
fn cached_decoding_matches_the_full_forward() {
    let (_varmap, model) = tiny();
    let model = model.detached();
    let input = ids(&[&[1, 2, 3, 4, 5, 6]]);
    let full = model.forward(&input, None).unwrap();
    let mut cache = KvCache::default();
    let prefix = model
        .forward_cached(&input.narrow(1, 0, 4).unwrap(), None, &mut cache)
        .unwrap();
    let step5 = model
        .forward_cached(&input.narrow(1, 4, 1).unwrap(), None, &mut cache)
        .unwrap();
    let step6 = model
        .forward_cached(&input.narrow(1, 5, 1).unwrap(), None, &mut cache)
        .unwrap();
    let stitched = Tensor::cat(&[&prefix, &step5, &step6], 1).unwrap();
    let diff = (full - stitched).unwrap().abs().unwrap().max_all().unwrap();
    assert!(diff.to_scalar::<f32>().unwrap() < 1e-4);
}

#[test]
fn padding_keys_do_not_change_real_tokens() {
    let (_varmap, model) = tiny();
    let plain = model.forward(&ids(&[&[3, 4, 5]]), None).unwrap();
    // The same tokens followed by padding that the mask hides.
    let padded_ids = ids(&[&[3, 4, 5, 0, 0]]);
    let mask = Tensor::new(&[[1u32, 1, 1, 0, 0]], &Device::Cpu).unwrap();
    let padded = model.forward(&padded_ids, Some(&mask)).unwrap();
    let diff = (plain - padded.narrow(1, 0, 3).unwrap())
        .unwrap()
        .abs()
        .unwrap();
    assert!(diff.max_all().unwrap().to_scalar::<f32>().unwrap() < 1e-5);
    let all: Vec<f32> = padded.flatten_all().unwrap().to_vec1().unwrap();
    assert!(all.iter().all(|v| v.is_finite()));
}

#[test]
fn reseeding_makes_initialization_reproducible() {
    let (map_a, a) = tiny();
    let (map_b, b) = tiny();
    a.reseed(&map_a, 7).unwrap();
    b.reseed(&map_b, 7).unwrap();
    let input = ids(&[&[1, 2, 3]]);
    let diff = (a.forward(&input, None).unwrap() - b.forward(&input, None).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap();
    assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0);
    let embed: Vec<f32> = map_a.data().lock().unwrap()["embed"]
        .as_tensor()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let std = (embed.iter().map(|v| v * v).sum::<f32>() / embed.len() as f32).sqrt();
    assert!((std - 0.02).abs() < 0.005, "{std}");
}

#[test]
fn detached_copy_records_no_graph() {
    let (_varmap, model) = tiny();
    let logits = model.detached().forward(&ids(&[&[1, 2]]), None).unwrap();
    let grads = logits.sum_all().unwrap().backward().unwrap();
    assert!(grads.get(&model.embed).is_none());
}

#[test]
fn weights_round_trip_through_safetensors() {
    let dir = verifine_test_support::scratch_dir("weights");
    let path = dir.join("model.safetensors");
    let (varmap, model) = tiny();
    save_weights(&varmap, &path).unwrap();
    let input = ids(&[&[1, 2, 3]]);
    let before = model.forward(&input, None).unwrap();

    let (mut other_map, other) = tiny();
    load_weights(&mut other_map, &path).unwrap();
    let after = other.forward(&input, None).unwrap();
    let diff = (before - after).unwrap().abs().unwrap().max_all().unwrap();
    assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0);
    let leftovers = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(leftovers, 0, "no temporary file left beside the weights");
}

#[test]
fn target_log_probs_are_the_log_softmax_of_the_logits_at_the_targets() {
    let (_, model) = tiny();
    let input = ids(&[&[1, 2, 3, 4], &[5, 6, 7, 0]]);
    let targets = ids(&[&[2, 3, 4, 5], &[6, 7, 8, 9]]);
    let mask = ids(&[&[1, 1, 1, 1], &[1, 1, 1, 0]]);
    let direct = model
        .target_log_probs(&input, Some(&mask), &targets)
        .unwrap();
    let logits = model.forward(&input, Some(&mask)).unwrap();
    let from_logits = candle_nn::ops::log_softmax(&logits, candle_core::D::Minus1)
        .unwrap()
        .gather(&targets.unsqueeze(2).unwrap(), 2)
        .unwrap()
        .squeeze(2)
        .unwrap();
    let diff = (direct - from_logits).unwrap().abs().unwrap();
    assert!(diff.max_all().unwrap().to_scalar::<f32>().unwrap() < 1e-6);
    assert!(
        model
            .target_log_probs(&input, None, &ids(&[&[1, 2]]))
            .is_err()
    );
}
