/* The page audit's measurements in the browser (bertology_utils.present.page_audit drives it).

window.bertologyAudit(options) looks at what is shown under options.root (a slide, or the whole page) and
returns {defects: [{kind, at, text, detail}], texts: [{at, text}]}: the defects it measures itself (text
outside the slide, text under options.minPx at slide size, overlapping text, a number cut by CSS's
ellipsis, figures' text boxes) and every visible text, whose wording Python's rules judge.

options: {slide: bool, skip: a selector of what is never shown as text (speaker notes, code input),
          minPx: the smallest font size at slide size, overlap: the fraction of the smaller box two boxes
          may share, textKey: the key of a PNG's tEXt chunk that holds its measured text}.
*/
(function () {
  "use strict";

  // The zoom applied to el by itself and its ancestors (the deck fitter shrinks slides and tables with zoom).
  function zoomOf(el) {
    if (typeof el.currentCSSZoom === "number") return el.currentCSSZoom;
    let zoom = 1;
    for (let a = el; a; a = a.parentElement) zoom *= parseFloat(getComputedStyle(a).zoom) || 1;
    return zoom;
  }

  function name(el) {
    const cls = typeof el.className === "string" && el.className.trim()
      ? "." + el.className.trim().split(/\s+/).slice(0, 2).join(".") : "";
    return el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + cls;
  }

  function shown(el) {
    // checkVisibility: also false inside a closed <details> (content-visibility: hidden) or a transparent parent
    if (el.checkVisibility && !el.checkVisibility({contentVisibilityAuto: true, opacityProperty: true})) return false;
    if (el.getClientRects().length === 0) return false;
    const style = getComputedStyle(el);
    return style.visibility === "visible" && parseFloat(style.opacity) > 0;
  }

  function area(r) { return Math.max(0, r.right - r.left) * Math.max(0, r.bottom - r.top); }

  function shared(a, b) {
    return area({left: Math.max(a.left, b.left), right: Math.min(a.right, b.right),
                 top: Math.max(a.top, b.top), bottom: Math.min(a.bottom, b.bottom)});
  }

  // Pairs of boxes (each {rect, owner}) of different owners sharing more than `fraction` of the smaller one.
  function overlapping(boxes, fraction) {
    const sorted = boxes.filter(b => area(b.rect) > 0).sort((a, b) => a.rect.top - b.rect.top);
    const pairs = new Map();
    for (let i = 0; i < sorted.length; i++) {
      for (let j = i + 1; j < sorted.length && sorted[j].rect.top < sorted[i].rect.bottom; j++) {
        const a = sorted[i], b = sorted[j];
        if (a.owner === b.owner) continue;
        const key = a.owner < b.owner ? a.owner + "," + b.owner : b.owner + "," + a.owner;
        if (!pairs.has(key) && shared(a.rect, b.rect) > fraction * Math.min(area(a.rect), area(b.rect))) {
          pairs.set(key, [a, b]);
        }
      }
    }
    return Array.from(pairs.values());
  }

  // The part of rect that el's clipping ancestors (overflow other than visible) let be seen, or null.
  function clipped(el, rect) {
    let r = {left: rect.left, top: rect.top, right: rect.right, bottom: rect.bottom};
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const style = getComputedStyle(a);
      if (`${style.overflowX} ${style.overflowY}` === "visible visible") continue;
      const box = a.getBoundingClientRect();
      r = {left: Math.max(r.left, box.left), top: Math.max(r.top, box.top),
           right: Math.min(r.right, box.right), bottom: Math.min(r.bottom, box.bottom)};
      if (r.right <= r.left || r.bottom <= r.top) return null;
    }
    return r;
  }

  // Whether, where two texts overlap, a positioned element with a background (a sticky header over a scrolled
  // list) is painted over the lower one: then only one is seen. Both must be hit there to judge.
  function hidden(a, b) {
    const x = (Math.max(a.rect.left, b.rect.left) + Math.min(a.rect.right, b.rect.right)) / 2;
    const y = (Math.max(a.rect.top, b.rect.top) + Math.min(a.rect.bottom, b.rect.bottom)) / 2;
    const stack = document.elementsFromPoint(x, y), ia = stack.indexOf(a.el), ib = stack.indexOf(b.el);
    if (ia < 0 || ib < 0) return false;
    const lower = stack[Math.max(ia, ib)];
    return stack.slice(0, Math.max(ia, ib)).some(e => !e.contains(lower) && covers(e));
  }

  function covers(el) {
    const style = getComputedStyle(el);
    const colour = (style.backgroundColor.match(/[\d.]+/g) || []).map(Number);
    return style.position !== "static" && (colour.length === 3 || (colour.length === 4 && colour[3] > 0.5));
  }

  const round = r => `[${[r.left, r.top, r.right, r.bottom].map(Math.round)}]`;

  // The measured text a PNG inlined as a data: URI carries in a tEXt chunk under key (core.figure_text's
  // png_with_text): what a renderer that knows nothing of data-text-boxes draws (a widget's output). Else null.
  function pngText(img, key) {
    const prefix = "data:image/png;base64,";
    if (!img.src.startsWith(prefix)) return null;
    const bytes = atob(img.src.slice(prefix.length)), keyword = key + "\0";
    const word = at => bytes.charCodeAt(at) * 2 ** 24 + (bytes.charCodeAt(at + 1) << 16) +
                       (bytes.charCodeAt(at + 2) << 8) + bytes.charCodeAt(at + 3);
    for (let at = 8; at + 8 <= bytes.length;) {  // the chunks after the signature: length, kind, data, CRC
      const length = word(at), kind = bytes.slice(at + 4, at + 8);
      if (kind === "tEXt" && bytes.startsWith(keyword, at + 8)) return bytes.slice(at + 8 + keyword.length, at + 8 + length);
      if (kind === "IEND") break;
      at += 12 + length;
    }
    return null;
  }

  window.bertologyAudit = function (options) {
    const root = options.slide ? Reveal.getCurrentSlide() : document.body;
    const defects = [], texts = [], boxes = [];
    const add = (kind, el, text, detail) => defects.push({kind, at: name(el), text: text.slice(0, 80), detail});
    // A slide: the 1280 x 720 area as reveal scales it into the window, and that scale.
    const slides = options.slide ? document.querySelector(".reveal .slides") : null;
    const frame = slides ? slides.getBoundingClientRect() : null;
    const scale = slides ? frame.width / Reveal.getConfig().width : 1;
    const outside = r => r.left < frame.left - 1 || r.top < frame.top - 1 || r.right > frame.right + 1
      || r.bottom > frame.bottom + 1;
    const baseZoom = slides ? zoomOf(slides) : 1;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    const away = new Set();  // elements reported outside: their children are not reported again
    let owner = 0;
    for (let node = root; node; node = walker.nextNode()) {
      const el = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
      if (el.closest(options.skip) || el.closest("script, style, template, noscript") || !shown(el)) continue;
      if (node.nodeType === Node.ELEMENT_NODE) {
        const style = getComputedStyle(el), r = el.getBoundingClientRect();
        if (slides && (r.width || r.height) && outside(r)) {
          if (!away.has(el.parentElement)) add("outside", el, el.textContent.trim(), `box ${round(r)} beyond ${round(frame)}`);
          away.add(el);
        }
        const clips = `${style.overflowX} ${style.overflowY}` !== "visible visible";
        if (slides && clips && (el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1)) {
          add("outside", el, el.textContent.trim(), `scrolls: ${el.scrollWidth}x${el.scrollHeight} in ${el.clientWidth}x${el.clientHeight}`);
        }
        if (style.textOverflow === "ellipsis" && el.scrollWidth > el.clientWidth + 1 && /\d/.test(el.textContent)) {
          add("cut-number", el, el.textContent.trim(), "cut by CSS text-overflow: ellipsis");
        }
        continue;
      }
      const text = node.data.replace(/\s+/g, " ").trim();
      if (!text) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const rects = Array.from(range.getClientRects()).filter(r => r.width > 0 && r.height > 0);
      if (rects.length === 0) continue;
      owner += 1;
      texts.push({at: name(el), text});
      rects.map(rect => clipped(el, rect)).filter(Boolean).forEach(rect => boxes.push({rect, owner, el, text}));
      if (!slides) continue;
      const out = rects.find(outside);
      if (out && !away.has(el)) add("outside", el, text, `text at ${round(out)} beyond ${round(frame)}`);
      // At slide size: SVG text by its transform to the screen over reveal's scale, HTML text by its zoom.
      const svg = el.closest("svg");
      const px = svg && el.getScreenCTM
        ? parseFloat(getComputedStyle(el).fontSize) * Math.hypot(el.getScreenCTM().a, el.getScreenCTM().b) / scale
        : parseFloat(getComputedStyle(el).fontSize) * zoomOf(el) / baseZoom;
      if (px < options.minPx - 0.05) add("small-text", el, text, `${px.toFixed(1)} px at slide size`);
    }
    for (const [a, b] of overlapping(boxes, options.overlap)) {
      if (hidden(a, b)) continue;
      add("overlap", a.el, a.text, `over "${b.text.slice(0, 40)}" (${name(b.el)}) at ${round(a.rect)} / ${round(b.rect)}`);
    }
    root.querySelectorAll("img").forEach(img => {
      if (img.closest(options.skip) || !shown(img)) return;
      const spec = img.getAttribute("data-text-boxes") ?? pngText(img, options.textKey);
      if (spec === null) {
        if (slides) add("figure-unmeasured", img, img.alt || "", "no data-text-boxes and none in the PNG: its text is not measured");
        return;
      }
      let measured;
      try { measured = JSON.parse(spec); } catch (error) {
        add("figure-unmeasured", img, img.alt || "", `data-text-boxes is not JSON: ${error}`);
        return;
      }
      // Boxes are in the image's own pixels; drawn at this width on the slide (or the page).
      const ratio = img.getBoundingClientRect().width / scale / measured.size[0];
      const labels = measured.boxes.map((b, k) => ({rect: {left: b[0], top: b[1], right: b[2], bottom: b[3]},
                                                   owner: k + 1, px: b[4] * ratio, text: String(b[5])}));
      labels.forEach(b => {
        if (slides && b.px < options.minPx - 0.05) add("figure-small-text", img, b.text, `${b.px.toFixed(1)} px at slide size`);
      });
      for (const [a, b] of overlapping(labels, options.overlap)) {
        add("figure-overlap", img, a.text, `over "${b.text.slice(0, 40)}" at ${round(a.rect)} / ${round(b.rect)} (image pixels)`);
      }
    });
    return {defects, texts};
  };
})();
