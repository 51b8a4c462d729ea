//! Timing a communication step cheaply. Reading the thread CPU clock is a system call (about
//! 1 µs here); two per `doStep` plus one every eight internal steps were as much as the whole
//! integration of the stiff double pendulum at a 1 ms communication step (about 3 µs of
//! work). The monotonic clock is read in user space (tens of nanoseconds).
//!
//! [`CallClock`] counts a call's first [`CPU_AFTER`] seconds by the monotonic clock and the
//! rest by the thread CPU clock, read from then on: short calls pay no system call, long ones
//! one per reading, and the CPU budget of a long call is CPU time, as before (the first
//! milliseconds count as CPU even when the thread was preempted in them: at most
//! [`CPU_AFTER`] too much).

use std::time::Instant;

/// Wall seconds after which a call reads the thread CPU clock.
pub const CPU_AFTER: f64 = 2e-3;

/// The clock of one call (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct CallClock {
    start: Instant,
    /// Wall seconds from the start and thread CPU time, when first past [`CPU_AFTER`].
    mark: Option<(f64, f64)>,
}

impl CallClock {
    pub fn start() -> Self {
        CallClock {
            start: Instant::now(),
            mark: None,
        }
    }

    /// Seconds since the start: wall time up to the mark, thread CPU time after it.
    pub fn elapsed(&mut self) -> f64 {
        let wall = self.start.elapsed().as_secs_f64();
        match self.mark {
            None if wall < CPU_AFTER => wall,
            None => {
                self.mark = Some((wall, thread_cpu_time()));
                wall
            }
            Some((w, c)) => w + (thread_cpu_time() - c),
        }
    }
}

/// This thread's CPU time in seconds (a system call), 0 where the clock is unavailable. By the
/// `cpu-time` crate, which keeps the platform calls (and their `unsafe`) out of this crate.
pub fn thread_cpu_time() -> f64 {
    cpu_time::ThreadTime::try_now().map_or(0.0, |t| t.as_duration().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short calls read wall time; a long one marks and then counts CPU time, which a sleep
    /// does not add to.
    #[test]
    fn short_calls_by_wall_time_long_ones_by_cpu_time() {
        let mut c = CallClock::start();
        let a = c.elapsed();
        assert!(c.mark.is_none() && (0.0..CPU_AFTER).contains(&a));
        // Busy past the threshold: marked.
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < 2.0 * CPU_AFTER {
            std::hint::black_box(0u64);
        }
        let b = c.elapsed();
        assert!(c.mark.is_some() && b >= 2.0 * CPU_AFTER, "{b}");
        // Asleep: the wall clock moves 50 ms, the CPU clock hardly.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let d = c.elapsed();
        assert!(d - b < 0.025, "sleeping counted {} s", d - b);
        assert!(c.start.elapsed().as_secs_f64() - d > 0.025);
    }
}
