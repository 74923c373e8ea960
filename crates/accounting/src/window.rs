//! The report's time window and its split into range queries that each stay within Prometheus's
//! limit of 11,000 points per series (`query_range` refuses more: prometheus v2.42.0
//! web/api/v1/api.go) and within a span that bounds one answer's size.

/// Most points one range query asks for (Prometheus refuses more than 11,000).
pub const MAX_POINTS: i64 = 11_000;
/// Longest span of one query, so one answer stays small whatever the step.
pub const MAX_SPAN_S: i64 = 7 * 86_400;

/// `[start, end)` sampled every `step` seconds: points at `start`, `start + step`, ... below `end`;
/// each point stands for the `step` seconds after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First point, unix seconds.
    pub start: i64,
    /// End (exclusive), unix seconds.
    pub end: i64,
    /// Step in seconds.
    pub step: i64,
}

/// Why a window cannot be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowError {
    /// `end` is not after `start`.
    Empty,
    /// The step is below a second or does not divide a day.
    Step(i64),
    /// The window is longer than the report allows.
    TooLong(i64),
}

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowError::Empty => f.write_str("the window is empty: --until must be after --since"),
            WindowError::Step(s) => write!(
                f,
                "a step of {s}s does not divide a day: use e.g. 1m, 5m, 15m, 1h"
            ),
            WindowError::TooLong(d) => write!(
                f,
                "a window of {d} days is longer than the 400 days a report covers"
            ),
        }
    }
}

impl std::error::Error for WindowError {}

/// One range query's `[start, end]` (both ends are points, as `query_range` counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// First point.
    pub start: i64,
    /// Last point.
    pub end: i64,
}

impl Window {
    /// A window whose start is aligned down to the step (so every point falls in one day).
    pub fn new(start: i64, end: i64, step: i64) -> Result<Window, WindowError> {
        if step < 1 || 86_400 % step != 0 {
            return Err(WindowError::Step(step));
        }
        if end <= start {
            return Err(WindowError::Empty);
        }
        let start = start.div_euclid(step) * step;
        if end <= start {
            return Err(WindowError::Empty);
        }
        let days = (end - start) / 86_400;
        if days > 400 {
            return Err(WindowError::TooLong(days));
        }
        Ok(Window { start, end, step })
    }

    /// Number of points.
    pub fn points(&self) -> i64 {
        (self.end - self.start + self.step - 1) / self.step
    }

    /// The range queries covering every point once, each within [`MAX_POINTS`] and [`MAX_SPAN_S`].
    pub fn chunks(&self) -> Vec<Chunk> {
        let per = (MAX_SPAN_S / self.step).clamp(1, MAX_POINTS);
        let mut out = Vec::new();
        let mut first = 0;
        let total = self.points();
        while first < total {
            let last = (first + per - 1).min(total - 1);
            out.push(Chunk {
                start: self.start + first * self.step,
                end: self.start + last * self.step,
            });
            first = last + 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_point_once_within_the_limit() {
        let w = Window::new(960_000, 960_000 + 90 * 86_400, 60).unwrap();
        let c = w.chunks();
        let mut n = 0;
        let mut next = w.start;
        for ch in &c {
            assert_eq!(ch.start, next);
            let pts = (ch.end - ch.start) / w.step + 1;
            assert!(pts <= MAX_POINTS, "{pts}");
            n += pts;
            next = ch.end + w.step;
        }
        assert_eq!(n, w.points());
        assert_eq!(w.points(), 90 * 1440);
        let h = Window::new(0, 90 * 86_400, 3600).unwrap();
        assert_eq!(h.chunks().len(), 13);
        assert_eq!(Window::new(5, 5, 60), Err(WindowError::Empty));
        assert_eq!(Window::new(0, 10, 7), Err(WindowError::Step(7)));
        assert!(matches!(
            Window::new(0, 500 * 86_400, 3600),
            Err(WindowError::TooLong(_))
        ));
    }
}
