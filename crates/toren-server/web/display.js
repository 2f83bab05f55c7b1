// Toren's one renderer for text a person reads (crates/toren-display), in the page: text
// that came from a model, a sandbox or a file is shown with every control, invisible or
// reordering character replaced by a visible marker (⟨ESC⟩, ⟨CR⟩, ⟨U+202E⟩). Which
// characters are hidden and how each is named is not decided here: the server generates
// TOREN_DISPLAY_TABLE (above this text) from toren-display, and these functions only
// apply it, character by character, as toren-display's render does.
"use strict";

const TorenDisplay = (() => {
  const ranges = TOREN_DISPLAY_TABLE.ranges;
  const names = TOREN_DISPLAY_TABLE.names;

  // Whether the code point is in one of the [first, last] pairs (a binary search).
  function isHidden(cp) {
    let lo = 0;
    let hi = ranges.length / 2 - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (cp < ranges[2 * mid]) hi = mid - 1;
      else if (cp > ranges[2 * mid + 1]) lo = mid + 1;
      else return true;
    }
    return false;
  }

  function marker(cp) {
    return names[cp] || "⟨U+" + cp.toString(16).toUpperCase().padStart(4, "0") + "⟩";
  }

  // Newlines and tabs pass in text that keeps its lines; nothing else hidden does.
  const markedInLines = (cp) => cp !== 10 && cp !== 9 && isHidden(cp);

  function render(text, marked) {
    let out = "";
    for (const ch of String(text)) {
      const cp = ch.codePointAt(0);
      out += marked(cp) ? marker(cp) : ch;
    }
    return out;
  }

  return {
    isHidden: isHidden,
    marker: marker,
    // One line: newlines and tabs are marked too (a name, a path, a host).
    visible: (text) => render(text, isHidden),
    // Text that keeps its lines (a command, output, the model's words).
    visibleLines: (text) => render(text, markedInLines),
    hiddenCount: (text) => {
      let n = 0;
      for (const ch of String(text)) if (markedInLines(ch.codePointAt(0))) n += 1;
      return n;
    },
    // The distinct markers visibleLines puts into the text, in order of first appearance.
    findings: (text) => {
      const found = [];
      for (const ch of String(text)) {
        const cp = ch.codePointAt(0);
        if (markedInLines(cp) && !found.includes(marker(cp))) found.push(marker(cp));
      }
      return found;
    },
  };
})();
