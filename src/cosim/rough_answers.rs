//! Answers inside a communication step (FMI 3 intermediate update) that are not smooth at any
//! time scale: an importer that reads a noisy measurement at every call.
//!
//! Inside a step the engine takes each answer as the signal's value at that time. A jump of
//! the answers against their trend is bracketed by shorter steps until one crosses it, and the
//! answer after it is applied as a step of the signal (an impulse where a driven motion
//! jumps). That is right for one jump in a step; for noise every answer is a jump, at every
//! step size. Measured before this file (moving-pivot pendulum, 1 ms steps, answers with 10 µm
//! of noise on a 5 cm motion, rtol 1e-4, 0.3 s): BDF Discarded in the first step (5 000
//! internal steps of 3e-8 s, each one restarted, or its step size below 1e-17 s), and
//! rosenbrock_nystrom, dopri5 and sdirk took 19 000 to 63 000 internal steps (up to 4.7 s of
//! CPU for the 0.3 s; at rtol 1e-7 up to 90 000 and 11.6 s) and left the pendulum up to
//! 0.85 m off (five of the six runs 0.4 m or more), status OK.
//!
//! So a step counts its reactions to the answers. Past [`MAX_REACTIONS`] jumps taken or
//! [`MAX_REDOS`] steps taken again the answers are rough: the step starts over from a copy of
//! the instance kept at its start ([`RoughAnswers::suspicious`] says when one is kept) and runs
//! on the communication point's reconstruction (the input's mode, bounded on noise), as if
//! the importer did not answer; without a copy, the rest of the step does. The following steps
//! take the inputs at the communication points only, for a pause that doubles each time the
//! answers are found rough again (1, 3, 7, … [`MAX_PAUSE`] steps); then they are asked again,
//! and any jump among them is rough. One jump of the signal in a step costs one or two
//! reactions and a few redos, so it never reaches the limits (`tests/moving_pivot.rs`, which
//! also measures the result: within 5 mm of the run without answers, against 0.4 m before).

use serde::{Deserialize, Serialize};

/// Jumps taken (an answer after a short step that left the accepted segment) and restarts
/// for a kink at the accepted time, per communication step, beyond which the answers are
/// taken as rough. One jump of the signal costs one of each at most.
pub const MAX_REACTIONS: u32 = 3;

/// Steps taken again because an answer left its trend (`StageSampled::take_redo`), per
/// communication step, beyond which the answers are taken as rough. Bracketing one jump
/// from a 1 ms step down to the stage resolution takes about ten.
pub const MAX_REDOS: u64 = 60;

/// The longest pause, in communication steps, before rough answers are asked for again.
pub const MAX_PAUSE: u32 = 63;

/// What the instance knows about its importer's answers: part of the FMU state, so that a
/// restored state asks again exactly when the original run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RoughAnswers {
    /// Communication steps still to run without asking.
    skip: u32,
    /// Consecutive steps that asked and found the answers rough.
    streak: u32,
    /// Steps that found the answers rough, in all.
    pub found: u64,
    /// Steps that asked, in all.
    asked: u64,
    /// The last step that asked reacted to its answers at least once.
    reacted: bool,
}

impl RoughAnswers {
    /// At the start of a step whose importer can answer: whether to ask it in this step.
    pub fn ask_now(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            false
        } else {
            true
        }
    }

    /// At the end of a step that asked, with its reactions to the answers: the pause now
    /// starting (in steps) if they were rough. A step without any reaction makes the pauses
    /// short again; one with a few that were not rough (steps taken again only, after
    /// answers were found rough) pauses as long as before.
    pub fn finish(&mut self, reactions: u32, redos: u64) -> Option<u32> {
        self.asked += 1;
        self.reacted = reactions > 0 || redos > 0;
        if self.too_rough(reactions, redos) {
            self.found += 1;
            self.streak = (self.streak + 1).min(MAX_PAUSE.trailing_ones());
        } else if reactions == 0 && redos == 0 {
            self.streak = 0;
            return None;
        } else if self.streak == 0 {
            return None;
        }
        self.skip = (1u32 << self.streak) - 1;
        Some(self.skip)
    }

    /// Whether a step about to ask should keep a copy of the instance to start over from
    /// without the answers, should they turn out rough: the first step that asks, every step
    /// after one that reacted to its answers, every step once answers were found rough. So a
    /// run whose answers are smooth copies once; one whose answers are noisy from the start
    /// never integrates with them in a step that finds them rough; one whose answers turn
    /// noisy later does so once.
    pub fn suspicious(&self) -> bool {
        self.asked == 0 || self.reacted || self.found > 0
    }

    /// Whether a step's reactions to the answers so far make them rough: beyond the limits,
    /// or, once answers were found rough, any jump or more than a quarter of [`MAX_REDOS`]
    /// (answers found rough before and reacted to again are taken as still rough: a step of
    /// noise that stayed within the limits sent the pendulum of the test 3 cm off; a real
    /// jump of such an input is then taken at the next communication point).
    pub fn too_rough(&self, reactions: u32, redos: u64) -> bool {
        if self.found > 0 {
            reactions > 0 || redos > MAX_REDOS / 4
        } else {
            reactions > MAX_REACTIONS || redos > MAX_REDOS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pauses double up to the cap; a step with a few reactions pauses as long again, a
    /// step without any makes the next pause short again.
    #[test]
    fn pauses_double_to_the_cap_and_reset_after_smooth_answers() {
        let rough = (MAX_REACTIONS + 1, 0);
        let mut r = RoughAnswers::default();
        let mut pauses = Vec::new();
        for _ in 0..8 {
            assert!(r.ask_now());
            let p = r.finish(rough.0, rough.1).unwrap();
            pauses.push(p);
            for _ in 0..p {
                assert!(!r.ask_now());
            }
        }
        assert_eq!(pauses, [1, 3, 7, 15, 31, 63, 63, 63]);
        assert!(r.ask_now());
        // A few redos after a pause (a jump would be rough again): paused as long.
        assert_eq!(r.finish(0, 5), Some(63));
        for _ in 0..63 {
            assert!(!r.ask_now());
        }
        assert!(r.ask_now());
        assert_eq!(r.finish(0, 0), None);
        assert!(r.ask_now());
        // Found rough before: one jump is rough now.
        assert_eq!(r.finish(1, 0), Some(1));
        assert!(!r.ask_now() && r.ask_now());
        assert_eq!(r.finish(1, 0), Some(3));
        assert_eq!(r.found, 10);
        // A jump now and then, with no streak: never a pause.
        let mut r = RoughAnswers::default();
        assert_eq!(r.finish(2, 12), None);
        assert!(r.ask_now());
        assert_eq!(r.found, 0);
    }

    #[test]
    fn a_copy_is_kept_first_after_reactions_and_when_asking_again() {
        let mut r = RoughAnswers::default();
        assert!(r.suspicious());
        r.finish(0, 0);
        assert!(!r.suspicious());
        r.finish(1, 3);
        assert!(r.suspicious());
        r.finish(0, 0);
        assert!(!r.suspicious());
        r.finish(MAX_REACTIONS + 1, 0);
        assert!(!r.ask_now());
        assert!(r.ask_now() && r.suspicious());
        r.finish(0, 0);
        assert!(r.suspicious());
    }

    #[test]
    fn the_limits_are_exceeded_not_reached_and_lower_after_a_pause() {
        let mut r = RoughAnswers::default();
        assert!(!r.too_rough(MAX_REACTIONS, MAX_REDOS));
        assert!(r.too_rough(MAX_REACTIONS + 1, 0));
        assert!(r.too_rough(0, MAX_REDOS + 1));
        r.finish(MAX_REACTIONS + 1, 0);
        while !r.ask_now() {}
        assert!(!r.too_rough(0, MAX_REDOS / 4));
        assert_eq!(r.finish(0, 0), None);
        assert!(r.ask_now() && r.suspicious());
        assert!(r.too_rough(1, 0));
        assert!(r.too_rough(0, MAX_REDOS / 4 + 1));
    }
}
