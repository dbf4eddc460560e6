//! What the student sees of a (prompt, response) pair: hashed word
//! unigrams and bigrams and character trigrams, the prompt's and the
//! response's in separate halves of the buckets, as term frequencies
//! scaled to unit length. Cheap, deterministic and vocabulary-free.

/// FNV-1a, so bucket numbers do not depend on the platform or a seed.
fn fnv1a(bytes: &[u8], salt: u64) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325 ^ salt, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The feature vector of a pair, `buckets` long (an even number).
pub fn featurize(prompt: &str, response: &str, buckets: usize) -> Vec<f32> {
    let half = (buckets / 2).max(1);
    let mut features = vec![0f32; half * 2];
    for (offset, text) in [(0, prompt), (half, response)] {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric() && c != '#' && c != '$')
            .filter(|w| !w.is_empty())
            .collect();
        let mut add = |key: &[u8], salt: u64| {
            features[offset + (fnv1a(key, salt) % half as u64) as usize] += 1.0;
        };
        for w in &words {
            add(w.as_bytes(), 1);
        }
        for pair in words.windows(2) {
            add(format!("{} {}", pair[0], pair[1]).as_bytes(), 2);
        }
        let chars: Vec<char> = lower.chars().collect();
        for tri in chars.windows(3) {
            add(tri.iter().collect::<String>().as_bytes(), 3);
        }
    }
    let norm = features.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        features.iter_mut().for_each(|v| *v /= norm);
    }
    features
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_pair_gives_the_same_unit_vector_and_sides_are_apart() {
        let a = featurize("two apples", "#### 2", 64);
        assert_eq!(a, featurize("two apples", "#### 2", 64));
        let norm: f32 = a.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        let swapped = featurize("#### 2", "two apples", 64);
        assert_ne!(
            a, swapped,
            "the prompt's words and the response's are told apart"
        );
        assert!(featurize("", "", 64).iter().all(|v| *v == 0.0));
    }
}
