//! AdamW with global-norm gradient clipping, linear warm-up and an optional
//! cosine decay, written out
//! (rather than candle-nn's) so its moments can be checkpointed for exact
//! resume.

use crate::error::{Result, TrainError};
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Optimizer settings (TRL / PyTorch names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimConfig {
    /// Peak learning rate, reached after `warmup_steps`.
    pub learning_rate: f64,
    /// Steps of linear warm-up from 0.
    pub warmup_steps: usize,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Added to the second-moment root.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Gradients are rescaled so their global L2 norm is at most this (0: off).
    pub max_grad_norm: f64,
    /// Steps after warm-up over which the rate falls along a cosine from
    /// its peak to `decay_floor` × peak, where it stays (0: constant). A
    /// run that ends at its peak rate ends wherever its last noisy steps
    /// happen to land; one that decays settles.
    pub decay_steps: usize,
    /// The fraction of the peak the decay ends at.
    pub decay_floor: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        OptimConfig {
            learning_rate: 1e-3,
            warmup_steps: 10,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            decay_steps: 0,
            decay_floor: 0.0,
        }
    }
}

/// AdamW over named variables.
pub struct AdamW {
    config: OptimConfig,
    vars: Vec<(String, Var)>,
    first: Vec<Tensor>,
    second: Vec<Tensor>,
    /// Updates applied so far.
    pub steps: usize,
}

impl AdamW {
    /// An optimizer over `vars` (name, variable), moments at zero.
    pub fn new(vars: Vec<(String, Var)>, config: OptimConfig) -> Result<Self> {
        let zeros = |v: &Var| v.as_tensor().zeros_like();
        let first = vars
            .iter()
            .map(|(_, v)| zeros(v))
            .collect::<candle_core::Result<_>>()?;
        let second = vars
            .iter()
            .map(|(_, v)| zeros(v))
            .collect::<candle_core::Result<_>>()?;
        Ok(AdamW {
            config,
            vars,
            first,
            second,
            steps: 0,
        })
    }

    /// The learning rate of the next step: linear warm-up, then constant
    /// or a cosine decay.
    pub fn learning_rate(&self) -> f64 {
        let (peak, warmup, step) = (
            self.config.learning_rate,
            self.config.warmup_steps,
            self.steps + 1,
        );
        if step < warmup {
            return peak * step as f64 / warmup as f64;
        }
        let decay = self.config.decay_steps;
        if decay == 0 {
            return peak;
        }
        let progress = ((step - warmup.max(1)) as f64 / decay as f64).min(1.0);
        let floor = self.config.decay_floor;
        peak * (floor + (1.0 - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()))
    }

    /// Clips and applies `grads`; returns the global gradient norm before clipping.
    /// A variable without a gradient is left unchanged.
    ///
    /// A non-finite gradient norm changes nothing (no update, no step
    /// counted) and is returned as it is: the caller logs the skipped step and
    /// the run goes on.
    pub fn step(&mut self, grads: &GradStore) -> Result<f64> {
        let norm = global_norm(grads, &self.vars)?;
        if !norm.is_finite() {
            tracing::warn!(norm, "non-finite gradient norm: update skipped");
            return Ok(norm);
        }
        let clip = if self.config.max_grad_norm > 0.0 && norm > self.config.max_grad_norm {
            self.config.max_grad_norm / (norm + 1e-6)
        } else {
            1.0
        };
        let lr = self.learning_rate();
        self.steps += 1;
        let c = &self.config;
        let (b1, b2) = (c.beta1, c.beta2);
        let bias1 = 1.0 - b1.powi(self.steps as i32);
        let bias2 = 1.0 - b2.powi(self.steps as i32);
        for (i, (_, var)) in self.vars.iter().enumerate() {
            let Some(grad) = grads.get(var.as_tensor()) else {
                continue;
            };
            let grad = (grad * clip)?;
            self.first[i] = ((&self.first[i] * b1)? + (&grad * (1.0 - b1))?)?;
            self.second[i] = ((&self.second[i] * b2)? + (grad.sqr()? * (1.0 - b2))?)?;
            let m_hat = (&self.first[i] / bias1)?;
            let v_hat = (&self.second[i] / bias2)?;
            let update = (m_hat / (v_hat.sqrt()? + c.eps)?)?;
            let theta = var.as_tensor();
            let decayed = (theta * (1.0 - lr * c.weight_decay))?;
            var.set(&(decayed - (update * lr)?)?)?;
        }
        Ok(norm)
    }

    /// Moments and step count by name, for checkpoints.
    pub fn state(&self) -> HashMap<String, Tensor> {
        let mut state = HashMap::new();
        for (i, (name, _)) in self.vars.iter().enumerate() {
            state.insert(format!("first.{name}"), self.first[i].clone());
            state.insert(format!("second.{name}"), self.second[i].clone());
        }
        state
    }

    /// Restores moments saved by [`AdamW::state`] and the step count.
    pub fn restore(&mut self, state: &HashMap<String, Tensor>, steps: usize) -> Result<()> {
        for (i, (name, _)) in self.vars.iter().enumerate() {
            let get = |kind: &str| {
                state
                    .get(&format!("{kind}.{name}"))
                    .cloned()
                    .ok_or_else(|| {
                        TrainError::Invalid(format!("optimizer state lacks {kind}.{name}"))
                    })
            };
            self.first[i] = get("first")?;
            self.second[i] = get("second")?;
        }
        self.steps = steps;
        Ok(())
    }
}

/// L2 norm of all gradients of `vars` together.
pub fn global_norm(grads: &GradStore, vars: &[(String, Var)]) -> Result<f64> {
    let mut total = 0.0f64;
    for (_, var) in vars {
        if let Some(g) = grads.get(var.as_tensor()) {
            total += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
        }
    }
    Ok(total.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn quadratic(start: f32, config: OptimConfig, steps: usize) -> (f32, AdamW) {
        let x = Var::new(&[start], &Device::Cpu).unwrap();
        let mut opt = AdamW::new(vec![("x".into(), x.clone())], config).unwrap();
        for _ in 0..steps {
            let loss = x.as_tensor().sqr().unwrap().sum_all().unwrap();
            opt.step(&loss.backward().unwrap()).unwrap();
        }
        (x.as_tensor().to_vec1::<f32>().unwrap()[0], opt)
    }

    #[test]
    fn minimizes_a_quadratic() {
        let config = OptimConfig {
            learning_rate: 0.1,
            warmup_steps: 0,
            ..OptimConfig::default()
        };
        let (x, _) = quadratic(3.0, config, 200);
        assert!(x.abs() < 0.05, "{x}");
    }

    #[test]
    fn first_step_moves_by_the_learning_rate() {
        // Adam's first update is lr · sign(g) whatever the gradient's size.
        let config = OptimConfig {
            learning_rate: 0.01,
            warmup_steps: 0,
            max_grad_norm: 0.0,
            ..OptimConfig::default()
        };
        let (x, _) = quadratic(100.0, config, 1);
        assert!((x - 99.99).abs() < 1e-4, "{x}");
    }

    #[test]
    fn warm_up_is_linear() {
        let x = Var::new(&[1.0f32], &Device::Cpu).unwrap();
        let config = OptimConfig {
            learning_rate: 1.0,
            warmup_steps: 4,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(vec![("x".into(), x)], config).unwrap();
        assert_eq!(opt.learning_rate(), 0.25);
        opt.steps = 3;
        assert_eq!(opt.learning_rate(), 1.0);
    }

    #[test]
    fn decay_falls_along_a_cosine_to_its_floor_and_stays() {
        let x = Var::new(&[1.0f32], &Device::Cpu).unwrap();
        let config = OptimConfig {
            learning_rate: 1.0,
            warmup_steps: 2,
            decay_steps: 10,
            decay_floor: 0.1,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(vec![("x".into(), x)], config).unwrap();
        let mut at = |steps: usize| {
            opt.steps = steps;
            opt.learning_rate()
        };
        assert_eq!((at(0), at(1)), (0.5, 1.0));
        let half = at(6);
        assert!((half - 0.55).abs() < 1e-12, "{half}");
        assert!((at(11) - 0.1).abs() < 1e-12);
        assert!((at(500) - 0.1).abs() < 1e-12);
        let rates: Vec<f64> = (1..12).map(&mut at).collect();
        assert!(rates.windows(2).all(|w| w[1] <= w[0]), "{rates:?}");
    }

    #[test]
    fn restored_state_continues_identically() {
        let config = OptimConfig {
            learning_rate: 0.05,
            ..OptimConfig::default()
        };
        let (straight, _) = quadratic(2.0, config.clone(), 10);
        let (half, opt) = quadratic(2.0, config.clone(), 5);
        let x = Var::new(&[half], &Device::Cpu).unwrap();
        let mut resumed = AdamW::new(vec![("x".into(), x.clone())], config).unwrap();
        resumed.restore(&opt.state(), opt.steps).unwrap();
        for _ in 0..5 {
            let loss = x.as_tensor().sqr().unwrap().sum_all().unwrap();
            resumed.step(&loss.backward().unwrap()).unwrap();
        }
        assert_eq!(x.as_tensor().to_vec1::<f32>().unwrap()[0], straight);
    }
}
