//! Stop strings over streamed text: text is released as soon as it cannot be the start of a
//! stop string, and generation ends before the first stop string met.

/// Matches stop strings in text pushed piece by piece.
#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    hit: Option<String>,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> StopMatcher {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
            hit: None,
        }
    }

    /// The stop string met, if any.
    pub fn hit(&self) -> Option<&str> {
        self.hit.as_deref()
    }

    /// Add `piece`; returns the text that is now certain and the stop string met, if one was
    /// (the text before it is returned; the stop string and anything after it are dropped,
    /// as is everything pushed after it).
    pub fn push(&mut self, piece: &str) -> (String, Option<String>) {
        if self.hit.is_some() {
            return (String::new(), self.hit.clone());
        }
        self.held.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()).map(|i| (i, s)))
            .min_by_key(|&(i, _)| i);
        if let Some((i, s)) = first {
            self.hit = Some(s.clone());
            let out = self.held[..i].to_owned();
            self.held.clear();
            return (out, self.hit.clone());
        }
        // Keep the longest tail that is a proper prefix of a stop string.
        let stops: Vec<&str> = self.stops.iter().map(String::as_str).collect();
        let keep = models::chat::dsml::held_back(&self.held, &stops);
        let n = self.held.len() - keep;
        (self.held.drain(..n).collect(), None)
    }

    /// The end of the text: whatever was held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_across_pieces_and_releases_false_starts() {
        let mut m = StopMatcher::new(&["END".into(), "\n\n".into()]);
        let end = Some("END".to_owned());
        assert_eq!(m.push("Hello E"), ("Hello ".into(), None));
        assert_eq!(m.push("Nx"), ("ENx".into(), None));
        assert_eq!(m.push(" a\n"), (" a".into(), None));
        assert_eq!(m.push("b EN"), ("\nb ".into(), None));
        assert_eq!(m.push("D tail"), (String::new(), end.clone()));
        assert_eq!(m.hit(), Some("END"));
        assert_eq!(m.push("more"), (String::new(), end));
    }

    #[test]
    fn no_stops_passes_through() {
        let mut m = StopMatcher::new(&[String::new()]);
        assert_eq!(m.push("abc"), ("abc".into(), None));
        assert_eq!(m.finish(), "");
    }

    #[test]
    fn held_text_is_released_at_the_end() {
        let mut m = StopMatcher::new(&["STOP".into()]);
        assert_eq!(m.push("x ST"), ("x ".into(), None));
        assert_eq!(m.finish(), "ST");
    }
}
