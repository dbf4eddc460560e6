//! A rubric's criterion ids as a type. The host matches each verdict to a
//! criterion of `describe()` by its id, so an id spelled two ways (in
//! `describe()` and in a verdict) used to show up only when scoring, as a
//! verdict no criterion claims. Declared once with [`criteria!`](crate::criteria!), the ids
//! are an enum: `describe()` and every verdict name its variants, and a
//! misspelled one does not compile.
//!
//! ```
//! use verifine_plugin_api::*;
//!
//! criteria! {
//!     /// What this rubric checks.
//!     pub enum Checks {
//!         Format = "format",
//!         Correct = "correct",
//!     }
//! }
//!
//! let info = RubricInfo::new("demo", "0.1.0")
//!     .criterion(Criterion::new(&Checks::Format, "ends with an answer line", 0.2))
//!     .criterion(Criterion::new(&Checks::Correct, "the answer is right", 0.8));
//! let verdict = Verdict::met(&Checks::Correct, true);
//! assert_eq!(verdict.criterion, info.criteria[1].id);
//! assert_eq!(Checks::ALL, [Checks::Format, Checks::Correct]);
//! ```
//!
//! A misspelled criterion is a compile error:
//!
//! ```compile_fail,E0599
//! use verifine_plugin_api::*;
//!
//! criteria! {
//!     pub enum Checks {
//!         Format = "format",
//!         Correct = "correct",
//!     }
//! }
//!
//! let verdict = Verdict::met(&Checks::Corect, true);
//! ```
//!
//! An id dereferences to its string, so every SDK call that takes a
//! criterion takes `&Checks::Format` as it takes `"format"`; plain strings
//! stay for rubrics whose criteria come from the data (HealthBench's
//! per-row items).

/// A type whose values are criterion ids; [`criteria!`](crate::criteria!) implements it.
pub trait CriterionId: Copy {
    /// The id as the host sees it.
    fn id(self) -> &'static str;
}

/// Declares a rubric's criterion ids as an enum: each variant with the id
/// the host sees. The enum gets [`CriterionId`], `Deref` to its id's `str`
/// (so `&Checks::Format` goes where a `&str` does), `ALL` (every variant,
/// in order) and the usual derives (`Debug`, `Clone`, `Copy`, `PartialEq`,
/// `Eq`, `Hash`). See the [module docs](mod@crate::criteria) for an example.
#[macro_export]
macro_rules! criteria {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $id:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$variant_meta])* $variant),+
        }

        impl $crate::CriterionId for $name {
            fn id(self) -> &'static str {
                match self {
                    $($name::$variant => $id),+
                }
            }
        }

        impl ::core::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                $crate::CriterionId::id(*self)
            }
        }

        impl $name {
            /// Every criterion, in the order declared.
            #[allow(dead_code)]
            pub const ALL: [$name; [$($id),+].len()] = [$($name::$variant),+];
        }
    };
}
