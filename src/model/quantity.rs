//! Kubernetes resource quantities (`2Gi`, `512Mi`, `10G`, `1.5e9`), bounded to what
//! Kubernetes can represent.
//!
//! The grammar is Kubernetes': an optional sign, a decimal number, then a binary suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal suffix (`n u m k M G T P E`) or a decimal exponent
//! (`e9`, `E+2`). Sizes must be positive. Kubernetes cannot represent a quantity above
//! 2^63-1 (it silently caps it), so a larger value is refused here with the same one-line error
//! as any other bad quantity; the comparison is exact, not floating point.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use super::Invalid;

/// Longest quantity text accepted; keeps the exact bound check cheap for any input.
pub const MAX_QUANTITY_TEXT_LEN: usize = 64;

/// The largest value, in base units, Kubernetes can represent.
const MAX_VALUE: u64 = i64::MAX as u64;

/// A positive Kubernetes quantity, kept as written (trimmed) so dry-run output shows what the
/// user typed. Convert to the API type where objects are built.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity(String);

impl Quantity {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value in base units (bytes for memory and disks), as a float: for arithmetic and
    /// display, where the exact decimal does not matter.
    pub fn value(&self) -> f64 {
        let Ok(parts) = split(&self.0) else {
            return 0.0;
        };
        let mantissa: f64 = format!("0{}.{}0", parts.whole, parts.fraction)
            .parse()
            .unwrap_or(0.0);
        let scale = match parts.scale {
            Scale::Decimal(e) => 10f64.powi(e.clamp(-400, 400) as i32),
            Scale::Binary(p) => 2f64.powi(p as i32),
            Scale::HugeExponent { .. } => 0.0,
        };
        mantissa * scale
    }
}

/// The smallest value the cluster accepts for one use of a quantity, and who refuses less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Minimum {
    /// In base units (bytes).
    pub bytes: u64,
    /// As a user would type it.
    pub text: &'static str,
    /// Who refuses less, and why (ends a message).
    pub why: &'static str,
}

/// KubeVirt's VMI admission refuses a memory request below 1M
/// (`validateMemoryRequestsNegativeOrNull`: "must be greater than or equal to 1M").
pub const MIN_VM_MEMORY: Minimum = Minimum {
    bytes: 1_000_000,
    text: "1M",
    why: "KubeVirt refuses a VM with less memory",
};

/// CDI aligns disk images to 1Mi (`DefaultAlignBlockSize`), so a smaller data disk has no
/// usable space and its DataVolume never succeeds.
pub const MIN_DISK_SIZE: Minimum = Minimum {
    bytes: 1 << 20,
    text: "1Mi",
    why: "CDI aligns disk images to 1Mi, so a smaller disk has no usable space",
};

impl Quantity {
    /// Whether this quantity is below `minimum`.
    pub fn is_below(&self, minimum: &Minimum) -> bool {
        // Exact for the integers the minimums are; a fractional text near the bound is
        // decided by the float, which errs by far less than a byte.
        self.value() < minimum.bytes as f64
    }
}

impl FromStr for Quantity {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        match problem(text) {
            None => Ok(Quantity(text.to_string())),
            Some(problem) => Err(Invalid::Expected(format!(
                "expected a positive Kubernetes quantity such as 2Gi, 512Mi or 10G ({problem})"
            ))),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A quantity's text split by the grammar.
struct Parts<'a> {
    negative: bool,
    whole: &'a str,
    fraction: &'a str,
    scale: Scale,
}

fn split(text: &str) -> Result<Parts<'_>, String> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'+') => (false, &text[1..]),
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    if !number.bytes().any(|b| b.is_ascii_digit()) {
        return Err("it does not start with a number".into());
    }
    let (whole, fraction) = match number.split_once('.') {
        Some((_, fraction)) if fraction.contains('.') => {
            return Err("the number has more than one decimal point".into());
        }
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    Ok(Parts {
        negative,
        whole,
        fraction,
        scale: parse_suffix(suffix)?,
    })
}

/// What is wrong with `text` as a positive, representable quantity; `None` when nothing is.
fn problem(text: &str) -> Option<String> {
    if text.len() > MAX_QUANTITY_TEXT_LEN {
        return Some(format!(
            "it is longer than {MAX_QUANTITY_TEXT_LEN} characters"
        ));
    }
    let parts = match split(text) {
        Ok(parts) => parts,
        Err(problem) => return Some(problem),
    };
    // value = digits × 10^(exp10) × 2^(pow2), digits without leading or trailing zeros.
    let digits = format!("{}{}", parts.whole, parts.fraction);
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() || parts.negative {
        return Some("it is not positive".into());
    }
    let (exp10, pow2) = match parts.scale {
        Scale::Decimal(e) => (e, 0),
        Scale::Binary(p) => (0, p),
        // A positive exponent this long is far beyond 2^63; a negative one is a tiny positive
        // value, which Kubernetes rounds up to its smallest unit.
        Scale::HugeExponent { negative: false } => return Some(too_large()),
        Scale::HugeExponent { negative: true } => return None,
    };
    let exp10 = exp10 - parts.fraction.len() as i64 + (digits.len() - significant.len()) as i64;
    if exceeds_max(significant, exp10, pow2) {
        return Some(too_large());
    }
    None
}

fn too_large() -> String {
    format!("it is larger than {MAX_VALUE}, the largest value Kubernetes can represent")
}

enum Scale {
    /// × 10^e
    Decimal(i64),
    /// × 2^p
    Binary(u32),
    HugeExponent {
        negative: bool,
    },
}

fn parse_suffix(suffix: &str) -> Result<Scale, String> {
    let scale = match suffix {
        "" => Scale::Decimal(0),
        "n" => Scale::Decimal(-9),
        "u" => Scale::Decimal(-6),
        "m" => Scale::Decimal(-3),
        "k" => Scale::Decimal(3),
        "M" => Scale::Decimal(6),
        "G" => Scale::Decimal(9),
        "T" => Scale::Decimal(12),
        "P" => Scale::Decimal(15),
        "E" => Scale::Decimal(18),
        "Ki" => Scale::Binary(10),
        "Mi" => Scale::Binary(20),
        "Gi" => Scale::Binary(30),
        "Ti" => Scale::Binary(40),
        "Pi" => Scale::Binary(50),
        "Ei" => Scale::Binary(60),
        other => {
            let exponent = other
                .strip_prefix(['e', 'E'])
                .ok_or_else(|| format!("unknown suffix {other:?}"))?;
            let (negative, digits) = match exponent.as_bytes().first() {
                Some(b'-') => (true, &exponent[1..]),
                Some(b'+') => (false, &exponent[1..]),
                _ => (false, exponent),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("unknown suffix {other:?}"));
            }
            match digits.parse::<i64>() {
                Ok(e) if e < 1_000_000 => Scale::Decimal(if negative { -e } else { e }),
                _ => Scale::HugeExponent { negative },
            }
        }
    };
    Ok(scale)
}

/// Whether `significant × 10^exp10 × 2^pow2` is above [`MAX_VALUE`] (`significant`: decimal
/// digits, no leading or trailing zero). Decided by order of magnitude when that is clear,
/// exactly otherwise.
fn exceeds_max(significant: &str, exp10: i64, pow2: u32) -> bool {
    // 2^pow2 lies in [10^floor, 10^ceil); pow2 is a multiple of 10 up to 60.
    const FLOOR: [i64; 7] = [0, 3, 6, 9, 12, 15, 18];
    const CEIL: [i64; 7] = [0, 4, 7, 10, 13, 16, 19];
    let (floor, ceil) = (FLOOR[(pow2 / 10) as usize], CEIL[(pow2 / 10) as usize]);
    // The value lies in [10^(order-1+floor), 10^(order+ceil)); MAX_VALUE ≈ 9.2 × 10^18.
    let order = significant.len() as i64 + exp10;
    if order - 1 + floor >= 19 {
        return true;
    }
    if order + ceil <= 18 {
        return false;
    }
    // Near the bound |exp10| is small (at most the text length plus 20).
    let mut value = Wide::from_decimal(significant);
    let mut max = Wide::from_u64(MAX_VALUE);
    for _ in 0..pow2 {
        value.mul_small(2);
    }
    for _ in 0..exp10.max(0) {
        value.mul_small(10);
    }
    for _ in 0..(-exp10).max(0) {
        max.mul_small(10);
    }
    value.cmp(&max) == Ordering::Greater
}

/// Just enough unsigned big-integer arithmetic for the exact bound check (base 2^32 limbs,
/// least significant first).
struct Wide(Vec<u32>);

impl Wide {
    fn from_u64(n: u64) -> Self {
        Wide(vec![n as u32, (n >> 32) as u32])
    }

    fn from_decimal(digits: &str) -> Self {
        let mut wide = Wide(vec![0]);
        for digit in digits.bytes() {
            wide.mul_small(10);
            wide.add_small(u32::from(digit - b'0'));
        }
        wide
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn add_small(&mut self, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.0 {
            let sum = u64::from(*limb) + carry;
            *limb = sum as u32;
            carry = sum >> 32;
            if carry == 0 {
                return;
            }
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn significant_limbs(&self) -> &[u32] {
        let len = self.0.iter().rposition(|&l| l != 0).map_or(0, |i| i + 1);
        &self.0[..len]
    }

    fn cmp(&self, other: &Wide) -> Ordering {
        let (a, b) = (self.significant_limbs(), other.significant_limbs());
        a.len()
            .cmp(&b.len())
            .then_with(|| a.iter().rev().cmp(b.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimums_are_the_clusters_own_bounds() {
        let q = |t: &str| t.parse::<Quantity>().unwrap();
        assert!(q("999999").is_below(&MIN_VM_MEMORY));
        assert!(q("976Ki").is_below(&MIN_VM_MEMORY));
        assert!(!q("1M").is_below(&MIN_VM_MEMORY));
        assert!(!q("977Ki").is_below(&MIN_VM_MEMORY));
        assert!(q("1M").is_below(&MIN_DISK_SIZE));
        assert!(q("1048575").is_below(&MIN_DISK_SIZE));
        assert!(!q("1Mi").is_below(&MIN_DISK_SIZE));
        assert!(!q("0.001Gi").is_below(&MIN_DISK_SIZE));
    }

    fn ok(text: &str) -> bool {
        text.parse::<Quantity>().is_ok()
    }

    fn reason(text: &str) -> String {
        text.parse::<Quantity>().unwrap_err().to_string()
    }

    #[test]
    fn the_kubernetes_grammar() {
        for good in [
            "2Gi", "512Mi", "1", "1.5G", "100m", "1e3", "1E+2", "+4Ki", "0.5", ".5Gi", "1.",
            "1.5e9",
        ] {
            assert!(ok(good), "{good}");
        }
        for bad in [
            "",
            "Gi",
            "2GB",
            "2 Gi",
            "1..2",
            "10MiB",
            "1e",
            "abc",
            "1x",
            "--1",
            "1K",
            "$(reboot)",
            ".",
            "1e+",
        ] {
            assert!(!ok(bad), "{bad}");
        }
        assert_eq!(" 2Gi ".parse::<Quantity>().unwrap().as_str(), "2Gi");
        let value = |text: &str| text.parse::<Quantity>().unwrap().value();
        assert_eq!(value("2Gi"), 2.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(value("1.5e3"), 1500.0);
        assert_eq!(value(".5k"), 500.0);
        assert_eq!(value("100m"), 0.1);
    }

    #[test]
    fn zero_and_negative_sizes_are_refused() {
        for bad in ["0", "0Gi", "-1Gi", "-0.5", "0.000", "+0e9"] {
            assert!(
                reason(bad).contains("not positive"),
                "{bad}: {}",
                reason(bad)
            );
        }
    }

    #[test]
    fn values_beyond_what_kubernetes_represents_are_refused_exactly() {
        // 2^63 - 1 is the largest; one more is refused, in every notation.
        assert!(ok("9223372036854775807"));
        assert!(ok("9223372036854775807000m"));
        assert!(ok("9223372036854775.807k"));
        assert!(ok("7Ei"));
        assert!(ok("8191Pi"));
        assert!(ok("9.223372036854775807E"));
        for too_big in [
            "9223372036854775808",
            "9223372036854775808000m",
            "8Ei",
            "8192Pi",
            "9.223372036854775808E",
            "1e19",
            "1e999",
            "1e99999999999999999999",
            "99999999999999999999Ei",
            "10E",
        ] {
            let why = reason(too_big);
            assert!(
                why.contains("largest value Kubernetes can represent"),
                "{too_big}: {why}"
            );
            assert!(why.starts_with("expected a positive Kubernetes quantity"));
        }
        // Tiny positive values are representable: Kubernetes rounds them up to 1n.
        assert!(ok("1e-999"));
        assert!(ok("1e-99999999999999999999"));
        assert!(reason(&"1".repeat(65)).contains("longer than 64"));
    }
}
