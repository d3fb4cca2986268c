// hivesched dashboard: reads the inspect API (../v1/inspect/) and draws it.
// Plain JavaScript, no framework, no build step; polls every 5 seconds while
// the page is visible (docs/dashboard.md).
'use strict';
(function () {
  const API = '../v1/inspect/';
  const POLL_MS = 5000;
  const HISTORY_MS = 30000;
  const DETAIL_LEAVES = 4096; // up to this many GPUs every node is drawn GPU by GPU
  const TABLE_ROWS = 1000;
  // Okabe-Ito, then Paul Tol's muted colours: told apart with the common
  // colour vision deficiencies; patterns, outlines and words say the state.
  const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442',
    '#882255', '#44AA99', '#999933', '#AA4499', '#332288', '#117733', '#88CCEE', '#DDCC77'];
  const CODE = {
    U: 'used by a guaranteed group', o: 'used by an opportunistic group', R: 'reserved for a preempting group',
    '.': 'free, bound to a virtual cluster', _: 'free, not bound', X: 'bad hardware',
    F: 'held by a pod hivesched did not place', '?': 'not schedulable now (unknown health)',
  };
  const FINISHED = new Set(['Completed', 'Failed', 'Rejected', 'Expired']);

  const S = {
    map: null, mapTag: null, tags: {}, vcs: [], groups: [], events: [], history: null, historyAt: 0,
    tab: 'cells', vcFilter: '', nodeFilter: '', onlyMatching: false, zoom: 1, fitted: false,
    expanded: new Set(), expandAll: false, table: false, highlight: null, selectedNode: null,
    live: true, busy: false, groupSort: { key: 'name', dir: 1 }, groupFilter: '', showFinished: false,
    layout: null,
  };

  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const colour = (i) => (i >= 0 ? PALETTE[i % PALETTE.length] : '#ffffff');
  const vcName = (i) => (S.map && i >= 0 ? S.map.virtualClusters[i] : '');

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function age(iso) {
    if (!iso) return '';
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 90) return Math.round(s) + 's';
    if (s < 5400) return Math.round(s / 60) + 'm';
    if (s < 172800) return Math.round(s / 3600) + 'h';
    return Math.round(s / 86400) + 'd';
  }
  const clock = (d) => d.toLocaleTimeString([], { hour12: false });

  // --- reading the API ---

  async function get(path, etag) {
    const headers = {};
    if (etag) headers['If-None-Match'] = etag;
    const resp = await fetch(API + path, { headers, cache: 'no-store', credentials: 'same-origin' });
    if (resp.status === 304) return { notModified: true };
    let body;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const msg = body && body.error ? body.error : resp.statusText;
      const err = new Error(`${path.split('?')[0]}: HTTP ${resp.status}: ${msg}`);
      err.status = resp.status;
      throw err;
    }
    return { body, etag: resp.headers.get('ETag') };
  }

  async function refresh(force) {
    if (S.busy || (!S.live && !force)) return;
    S.busy = true;
    try {
      const [vcs, groups, events, map] = await Promise.all([
        get('virtualclusters', S.tags.vcs), get('affinitygroups?all=true', S.tags.groups), get('events'), get('cellmap', S.mapTag)]);
      // 304: unchanged since the last answer (an ETag of its content).
      if (!vcs.notModified) { S.vcs = vcs.body || []; S.tags.vcs = vcs.etag; }
      if (!groups.notModified) { S.groups = groups.body || []; S.tags.groups = groups.etag; }
      S.events = events.body || [];
      let mapChanged = false;
      if (!map.notModified) {
        S.map = map.body;
        S.mapTag = map.etag;
        mapChanged = true;
      }
      if (force || Date.now() - S.historyAt > HISTORY_MS) {
        S.history = (await get('history')).body;
        S.historyAt = Date.now();
      }
      refreshHighlight();
      if (mapChanged && S.selectedNode && !$('nodeDetail').hidden) showNode(S.selectedNode, true);
      showError(null);
      $('updated').textContent = 'updated ' + clock(new Date());
      $('updated').dataset.at = String(Date.now());
      render(mapChanged || force);
    } catch (e) {
      showError(e);
    } finally {
      S.busy = false;
    }
  }

  function showError(e) {
    const box = $('error');
    if (!e) { box.hidden = true; box.textContent = ''; return; }
    box.hidden = false;
    box.textContent = 'Could not read the scheduler: ' + e.message + (S.map ? ' (showing the last answer)' : '');
  }

  // --- rendering ---

  function render(mapChanged) {
    renderSummary();
    if (mapChanged) { renderFilters(); renderLegend(); }
    if (S.tab === 'cells') { renderTree(); } else { S.treeStale = true; }
    renderVCs();
    renderGroups();
    renderEvents();
    document.body.dataset.ready = 'true';
  }

  function countLeaves(pred) {
    let n = 0;
    if (!S.map) return 0;
    for (const ch of S.map.chains) for (const nd of ch.nodes) {
      for (const c of nd.leaves) if (c !== ' ' && pred(c, nd)) n++;
    }
    return n;
  }

  // plural names n things: "1 group", "2 groups".
  function plural(n, word) { return n === 1 ? word : word + 's'; }

  function renderSummary() {
    if (!S.map) return;
    const total = countLeaves(() => true);
    const used = countLeaves((c) => c === 'U' || c === 'R');
    const opp = countLeaves((c) => c === 'o');
    const free = countLeaves((c) => c === '.' || c === '_');
    const unav = countLeaves((c) => c === 'X' || c === 'F' || c === '?');
    const nodes = S.map.chains.reduce((a, ch) => a + ch.nodes.length, 0);
    const waiting = S.groups.filter((g) => g.state === 'Pending' || g.state === 'Preempting').length;
    $('summary').innerHTML = `<b>${total}</b> ${plural(total, 'GPU')} on <b>${nodes}</b> ${plural(nodes, 'node')}: <b>${used}</b> used, <b>${opp}</b> opportunistic, ` +
      `<b>${free}</b> free, <b>${unav}</b> unavailable &middot; <b>${S.vcs.length}</b> ${plural(S.vcs.length, 'virtual cluster')} &middot; ` +
      `<b>${waiting}</b> ${plural(waiting, 'group')} waiting`;
  }

  function renderFilters() {
    const sel = $('vcFilter');
    const cur = S.vcFilter;
    sel.replaceChildren(el('option', { value: '', text: 'all' }),
      ...S.map.virtualClusters.map((n) => el('option', { value: n, text: n, selected: n === cur })));
    const names = [];
    for (const ch of S.map.chains) for (const nd of ch.nodes) names.push(nd.name);
    if (names.length <= 5000) $('nodeNames').replaceChildren(...names.map((n) => el('option', { value: n })));
  }

  function swatch(fill, extra) {
    return `<svg width="14" height="14" aria-hidden="true"><rect x="1" y="1" width="12" height="12" fill="${fill}" stroke="#57606a" ${extra || ''}/></svg>`;
  }

  function renderLegend() {
    const parts = [];
    S.map.virtualClusters.forEach((n, i) => parts.push(`<span>${swatch(colour(i))}${esc(n)}</span>`));
    parts.push(`<span>${swatch(S.map.virtualClusters.length ? colour(0) : '#ccc', 'fill-opacity="0.28"')}free, bound to the VC (light)</span>`);
    parts.push(`<span><svg width="14" height="14" aria-hidden="true">${defs([0])}<rect x="1" y="1" width="12" height="12" fill="url(#opp-0)" stroke="#57606a"/></svg>opportunistic (hatched, its VC's colour)</span>`);
    parts.push(`<span>${swatch(colour(0), 'stroke-dasharray="2 1.4" stroke-width="1.6" stroke="#000"')}reserved for a preemptor (dashed outline)</span>`);
    parts.push(`<span>${swatch('#ffffff')}free, not bound</span>`);
    parts.push(`<span><svg width="14" height="14" aria-hidden="true">${defs([])}<rect x="1" y="1" width="12" height="12" fill="url(#bad)" stroke="#57606a"/></svg>bad hardware (crossed)</span>`);
    parts.push(`<span><svg width="14" height="14" aria-hidden="true"><rect x="1" y="1" width="12" height="12" fill="url(#foreign)" stroke="#57606a"/></svg>foreign pod (dotted)</span>`);
    parts.push(`<span><svg width="14" height="14" aria-hidden="true"><rect x="1" y="1" width="12" height="12" fill="url(#unknown)" stroke="#57606a"/></svg>unknown health</span>`);
    parts.push(`<span>${swatch('#ffffff', 'stroke="#000" stroke-width="2.6"')}the selected group's GPUs</span>`);
    $('legend').innerHTML = parts.join('');
  }

  // Patterns: opportunistic use of each VC (hatched), bad, foreign, unknown.
  function defs(vcIdx) {
    let d = '<defs>';
    for (const i of vcIdx) {
      d += `<pattern id="opp-${i}" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
        `<rect width="5" height="5" fill="${colour(i)}"/><rect width="2" height="5" fill="#ffffff"/></pattern>`;
    }
    d += '<pattern id="bad" width="12" height="12" patternUnits="objectBoundingBox" patternContentUnits="objectBoundingBox">' +
      '<rect width="1" height="1" fill="#3b3b3b"/><path d="M0.15 0.15L0.85 0.85M0.85 0.15L0.15 0.85" stroke="#ffffff" stroke-width="0.16"/></pattern>' +
      '<pattern id="foreign" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#b8b8b8"/><circle cx="2" cy="2" r="0.9" fill="#000"/></pattern>' +
      '<pattern id="unknown" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#e6e6e6"/><rect width="1" height="4" fill="#7a7a7a"/></pattern>' +
      '</defs>';
    return d;
  }

  function leafFill(code, owner) {
    switch (code) {
      case 'U': case 'R': return { fill: colour(owner) };
      case 'o': return { fill: `url(#opp-${Math.max(owner, 0)})` };
      case '.': return { fill: colour(owner), op: 0.28 };
      case 'X': return { fill: 'url(#bad)' };
      case 'F': return { fill: 'url(#foreign)' };
      case '?': return { fill: 'url(#unknown)' };
    }
    return { fill: '#ffffff' };
  }

  // nodeStats counts a node's leaves by code and users by VC.
  function nodeStats(nd) {
    const s = { total: 0, U: 0, o: 0, R: 0, free: 0, unav: 0, byVC: new Map() };
    let k = 0;
    for (const c of nd.leaves) {
      if (c === ' ') continue;
      s.total++;
      if (c === 'U' || c === 'o' || c === 'R') {
        s[c]++;
        const key = nd.owners[k] + (c === 'o' ? 'o' : '');
        s.byVC.set(key, (s.byVC.get(key) || 0) + 1);
      } else if (c === '.' || c === '_') s.free++;
      else s.unav++;
      k++;
    }
    return s;
  }

  function nodeText(nd, st) {
    const users = [...st.byVC.entries()].map(([k, n]) => {
      const opp = k.endsWith('o');
      const i = parseInt(k, 10);
      return `${vcName(i) || 'no VC'}${opp ? ' opportunistic' : ''} ${n}`;
    });
    let t = `node ${nd.name}: ${st.total} GPUs, ${st.U + st.o + st.R} used`;
    if (users.length) t += ` (${users.join(', ')})`;
    t += `, ${st.free} free`;
    if (st.unav) t += `, ${st.unav} unavailable`;
    if (nd.vc >= 0) t += `; bound to ${vcName(nd.vc)}`;
    if (nd.pinned) t += ` (pinned cell ${nd.pinned})`;
    if (nd.health !== 'good') t += `; health ${nd.health}`;
    return t;
  }

  function nodeMatches(nd) {
    if (S.nodeFilter && !nd.name.toLowerCase().includes(S.nodeFilter.toLowerCase())) return false;
    if (S.vcFilter) {
      const v = S.map.virtualClusters.indexOf(S.vcFilter);
      if (nd.vc !== v && !nd.owners.includes(v)) return false;
    }
    return true;
  }

  function rackLabel(ch, ci) {
    const parts = [];
    for (let i = ci; i >= 0; i = ch.cells[i].parent) {
      const c = ch.cells[i];
      parts.unshift(`${ch.levels[c.level - 1] || ''} ${c.address}`);
    }
    return parts.join(' / ');
  }

  // layoutTree places chains, racks (the cells right above nodes), nodes
  // and, where drawn GPU by GPU, their leaves. It returns an SVG string.
  function renderTree() {
    if (!S.map) return;
    S.treeStale = false;
    const svgEl = $('tree');
    const active = document.activeElement;
    const focusKey = active && active.dataset ? active.dataset.key : null;
    const totalLeaves = countLeaves(() => true);
    const detailAll = totalLeaves <= DETAIL_LEAVES;
    const vcIdx = S.vcFilter ? S.map.virtualClusters.indexOf(S.vcFilter) : -2;
    const hl = S.highlight;
    const W = 1240;
    const LEAF = 11, LG = 2, SEP = 3, NP = 4, NLAB = 12, TILE = 14, TG = 3, RP = 6, RLAB = 18;
    let out = '';
    let y = 4, maxX = 400;
    const allVC = S.map.virtualClusters.map((_, i) => i);
    for (let chi = 0; chi < S.map.chains.length; chi++) {
      const ch = S.map.chains[chi];
      const clabel = `chain ${ch.name} (${ch.leafCellType}; ${ch.levels.join(' < ')})`;
      out += `<text class="clabel" x="4" y="${y + 14}">${esc(clabel)}</text>`;
      maxX = Math.max(maxX, 8 + clabel.length * 7.5);
      y += 22;
      // Racks: the nodes of each parent cell, in order.
      const racks = new Map();
      ch.nodes.forEach((nd, ni) => {
        const key = nd.parent;
        if (!racks.has(key)) racks.set(key, []);
        racks.get(key).push(ni);
      });
      let x = 4, rowH = 0;
      for (const [ci, nodeIdx] of racks) {
        const rkey = `${chi}:${ci}`;
        let nodes = nodeIdx.map((ni) => ch.nodes[ni]);
        const match = nodes.map(nodeMatches);
        if (S.onlyMatching) nodes = nodes.filter((_, k) => match[k]);
        if (!nodes.length) continue;
        const hasHl = hl && nodes.some((nd) => hl.nodes.has(nd.name));
        const expanded = detailAll || S.expandAll || S.expanded.has(rkey) || hasHl ||
          (S.nodeFilter && nodes.length <= 64 && nodes.some((nd) => nodeMatches(nd)));
        const stats = nodes.map(nodeStats);
        // Sizes.
        let nw, nh, cols;
        if (expanded) {
          const maxLeaves = Math.max(...nodes.map((nd) => nd.leaves.length));
          nw = Math.max(2 * NP + maxLeaves * (LEAF + LG), 60);
          nh = NLAB + LEAF + 2 * NP;
          cols = Math.max(1, Math.min(nodes.length, Math.floor(560 / (nw + 6))));
        } else {
          nw = TILE; nh = TILE;
          cols = Math.min(nodes.length, 10);
        }
        const rows = Math.ceil(nodes.length / cols);
        const gap = expanded ? 6 : TG;
        const rw = Math.max(2 * RP + cols * (nw + gap) - gap, 110);
        const rh = RLAB + 2 * RP + rows * (nh + gap) - gap;
        if (x + rw > W && x > 4) { x = 4; y += rowH + 10; rowH = 0; }
        const used = stats.reduce((a, s) => a + s.U + s.o + s.R, 0);
        const total = stats.reduce((a, s) => a + s.total, 0);
        const label = ci >= 0 ? rackLabel(ch, ci) : `${ch.name} nodes`;
        const rackDim = (vcIdx >= -1 || S.nodeFilter) && !nodes.some((nd, k) => nodeMatches(nd));
        const aria = `${label}: ${nodes.length} nodes, ${used} of ${total} GPUs used` +
          (detailAll ? '' : expanded ? '; expanded, Enter to collapse' : '; Enter to expand');
        out += `<g class="rack${rackDim ? ' dim' : ''}" data-key="r${esc(rkey)}" data-rack="${esc(rkey)}" tabindex="0" role="button" aria-expanded="${expanded}" aria-label="${esc(aria)}" transform="translate(${x},${y})">`;
        out += `<rect class="box" width="${rw}" height="${rh}" rx="3"/>`;
        out += `<text class="rlabel" x="${RP}" y="13">${detailAll ? '' : `<tspan class="expander">${expanded ? '\u25BE' : '\u25B8'}</tspan> `}${esc(label)}</text>`;
        nodes.forEach((nd, k) => {
          const st = stats[k];
          const nx = RP + (k % cols) * (nw + gap);
          const ny = RLAB + RP + Math.floor(k / cols) * (nh + gap);
          const m = nodeMatches(nd);
          const cls = ['node'];
          if (nd.health !== 'good') cls.push('bad');
          if (!m && (vcIdx >= -1 || S.nodeFilter)) cls.push('dim');
          if (S.selectedNode === nd.name) cls.push('selected');
          const text = nodeText(nd, st);
          out += `<g class="${cls.join(' ')}" data-key="n${esc(nd.name)}" data-node="${esc(nd.name)}" tabindex="-1" role="button" aria-label="${esc(text)}" transform="translate(${nx},${ny})">`;
          if (expanded) {
            out += `<rect class="box" width="${nw}" height="${nh}" rx="2"/><text class="label" x="${NP}" y="${NLAB - 2}">${esc(nd.name)}</text>`;
            let lx = NP, li = 0;
            for (const c of nd.leaves) {
              if (c === ' ') { lx += SEP; continue; }
              const owner = nd.owners[li], idx = nd.indices[li];
              li++;
              const f = leafFill(c, owner);
              const lcls = ['leaf', c === 'R' ? 'R' : ''];
              const key = nd.name + '#' + idx;
              if (hl) lcls.push(hl.keys.has(key) ? 'hl' : 'dim');
              else if (vcIdx >= -1 && owner !== vcIdx && nd.vc !== vcIdx) lcls.push('dim');
              const who = owner >= 0 ? ` (${vcName(owner)})` : '';
              out += `<rect class="${lcls.join(' ').trim()}" data-leaf="${esc(key)}" data-code="${esc(c)}" x="${lx}" y="${NLAB + NP - 2}" width="${LEAF}" height="${LEAF}" fill="${f.fill}"${f.op ? ` fill-opacity="${f.op}"` : ''}>` +
                `<title>${esc(`${nd.name} ${ch.leafCellType} ${idx}: ${CODE[c] || c}${who}`)}</title></rect>`;
              lx += LEAF + LG;
            }
          } else {
            // A tile: the VC it is bound to, lightly; filled from the bottom
            // by its use, in the colour of the VC using most of it.
            let top = null, topN = 0;
            for (const [k2, n] of st.byVC) if (n > topN) { top = k2; topN = n; }
            const bg = nd.vc >= 0 ? `fill="${colour(nd.vc)}" fill-opacity="0.28"` : 'fill="#ffffff"';
            out += `<rect class="box" width="${TILE}" height="${TILE}" ${bg}/>`;
            const u = st.U + st.o + st.R;
            if (u > 0 && st.total > 0) {
              const h = Math.max(2, Math.round((TILE * u) / st.total));
              const i = parseInt(top, 10);
              const fill = top.endsWith('o') ? `url(#opp-${Math.max(i, 0)})` : colour(i);
              out += `<rect x="0" y="${TILE - h}" width="${TILE}" height="${h}" fill="${fill}"/>`;
            }
            if (st.unav) out += `<path d="M2 2L${TILE - 2} ${TILE - 2}M${TILE - 2} 2L2 ${TILE - 2}" stroke="#3b3b3b" stroke-width="1.5"/>`;
            if (hl && hl.nodes.has(nd.name)) out += `<rect class="leaf hl" width="${TILE}" height="${TILE}" fill="none"/>`;
            out += `<title>${esc(text)}</title>`;
          }
          out += '</g>';
        });
        out += '</g>';
        maxX = Math.max(maxX, x + rw);
        x += rw + 10;
        rowH = Math.max(rowH, rh);
      }
      y += rowH + 16;
    }
    const H = y + 4;
    S.layout = { W: Math.min(W, maxX + 6), H };
    const z = S.zoom;
    svgEl.setAttribute('viewBox', `0 0 ${S.layout.W} ${H}`);
    svgEl.setAttribute('width', String(Math.round(S.layout.W * z)));
    svgEl.setAttribute('height', String(Math.round(H * z)));
    svgEl.innerHTML = defs(allVC) + out;
    if (focusKey) {
      const again = svgEl.querySelector(`[data-key="${CSS.escape(focusKey)}"]`);
      if (again) again.focus({ preventScroll: true });
    }
    if (!S.fitted) { S.fitted = true; fit(); }
    if (S.table) renderCellTable();
  }

  function fit() {
    if (!S.layout) return;
    // Small clusters are drawn larger, large ones fit the width (then zoom
    // in, or expand a rack).
    const w = $('viewport').clientWidth || S.layout.W;
    setZoom(Math.min(1.5, (w - 4) / S.layout.W));
  }

  function setZoom(z) {
    S.zoom = Math.max(0.1, Math.min(8, z));
    $('zoomLevel').textContent = Math.round(S.zoom * 100) + '%';
    if (S.layout) {
      $('tree').setAttribute('width', String(Math.round(S.layout.W * S.zoom)));
      $('tree').setAttribute('height', String(Math.round(S.layout.H * S.zoom)));
    }
  }

  function renderCellTable() {
    const rows = [];
    let more = 0;
    for (const ch of S.map.chains) {
      for (const nd of ch.nodes) {
        if (!nodeMatches(nd)) continue;
        if (rows.length >= TABLE_ROWS) { more++; continue; }
        const st = nodeStats(nd);
        const rack = nd.parent >= 0 ? rackLabel(ch, nd.parent) : '';
        rows.push(`<tr><td>${esc(ch.name)}</td><td>${esc(rack)}</td><th scope="row">${esc(nd.name)}</th><td>${esc(vcName(nd.vc) || '-')}${nd.pinned ? ' (pinned ' + esc(nd.pinned) + ')' : ''}</td>` +
          `<td class="num">${st.total}</td><td class="num">${st.U}</td><td class="num">${st.o}</td><td class="num">${st.R}</td><td class="num">${st.free}</td><td class="num">${st.unav}</td>` +
          `<td>${esc(nd.health)}</td><td class="mono">[${esc(nd.leaves)}]</td></tr>`);
      }
    }
    $('cellTable').innerHTML = `<table><caption>Nodes${S.vcFilter || S.nodeFilter ? ' matching the filters' : ''}: GPUs by state; the map: ` +
      Object.entries(CODE).map(([c, t]) => `${esc(c)} ${esc(t)}`).join(', ') +
      (more ? `. ${more} more rows: narrow the filters.` : '.') + '</caption>' +
      '<thead><tr><th>Chain</th><th>Rack</th><th>Node</th><th>Bound to VC</th><th class="num">GPUs</th><th class="num">Used</th><th class="num">Opportunistic</th>' +
      '<th class="num">Reserved</th><th class="num">Free</th><th class="num">Unavailable</th><th>Health</th><th>Map</th></tr></thead><tbody>' +
      rows.join('') + '</tbody></table>';
  }

  async function showNode(name, quiet) {
    S.selectedNode = name;
    const box = $('nodeDetail');
    box.hidden = false;
    if (!quiet) box.innerHTML = `<h2>Node ${esc(name)}</h2><p>Loading&hellip;</p>`;
    try {
      const { body } = await get('cells?node=' + encodeURIComponent(name));
      const leaves = [];
      const walk = (cells) => { for (const c of cells) { if (c.level === 1) leaves.push(c); walk(c.children || []); } };
      for (const ch of body.chains) walk(ch.cells);
      const rows = leaves.map((c) => `<tr><td class="num">${c.index}</td><td>${esc(c.state || '')}</td><td>${esc(c.group || (c.state === 'Used' ? '(another namespace)' : ''))}</td>` +
        `<td class="num">${c.priority === undefined || c.priority === null ? '' : c.priority}</td><td>${esc(c.reservingGroup || '')}</td>` +
        `<td>${esc(c.virtualCluster || '')}</td><td>${esc(c.health)}</td></tr>`);
      box.innerHTML = `<h2>Node ${esc(name)}</h2><table><caption>Its GPUs (leaf cells)</caption><thead><tr><th class="num">Index</th><th>State</th><th>Group</th>` +
        `<th class="num">Priority</th><th>Reserved for</th><th>Bound to VC</th><th>Health</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
    } catch (e) {
      box.innerHTML = `<h2>Node ${esc(name)}</h2><p class="bad">${esc(e.message)}</p>`;
    }
    if (!quiet) renderTree();
  }

  // --- virtual clusters ---

  function renderVCs() {
    const rows = S.vcs.map((v) => {
      const c = v.leafCells || {};
      const sum = (c.used || 0) + (c.free || 0) + (c.lent || 0) + (c.unavailable || 0);
      const ok = sum === (c.total || 0);
      const g = v.affinityGroups || {};
      return `<tr data-vc="${esc(v.name)}"><th scope="row"><span class="swatch"></span> ${esc(v.name)}</th><td>${esc(v.state || '')}</td>` +
        `<td class="num">${c.total || 0}</td><td class="num">${c.used || 0}</td><td class="num">${c.free || 0}</td><td class="num">${c.lent || 0}</td>` +
        `<td class="num">${c.unavailable || 0}</td><td class="${ok ? 'ok' : 'bad'}">${ok ? '\u2713 adds up' : '\u2717 off by ' + (c.total - sum)}</td>` +
        `<td class="num">${c.reserved || 0}</td><td class="num">${c.lost || 0}</td><td class="num">${c.opportunistic || 0}</td>` +
        `<td class="num">${g.Pending || 0}</td><td class="num">${g.Preempting || 0}</td><td class="num">${(g.Allocated || 0) + (g['Being preempted'] || 0)}</td></tr>`;
    });
    $('vcTable').innerHTML = '<table><caption>Leaf cells (GPUs) per virtual cluster, as <code>kubectl get vc</code> counts them: Total = Used + Free + Lent + Unavailable. ' +
      'Reserved is part of Used (for preempting groups); Lost counts its cells on lost hardware or held by foreign pods, used or not; ' +
      'Opportunistic is its own jobs outside its guarantee, on any VC\'s cells, not part of its Total.</caption>' +
      '<thead><tr><th>Virtual cluster</th><th>State</th><th class="num">Total</th><th class="num">Used</th><th class="num">Free</th><th class="num">Lent</th>' +
      '<th class="num">Unavailable</th><th>Sum</th><th class="num">Reserved</th><th class="num">Lost</th><th class="num">Opportunistic</th>' +
      '<th class="num">Pending</th><th class="num">Preempting</th><th class="num">Running</th></tr></thead><tbody>' + rows.join('') + '</tbody></table>';
    // The swatch's colour: a CSSOM write (the page's CSP allows no inline style).
    if (S.map) {
      for (const tr of $('vcTable').querySelectorAll('tr[data-vc]')) {
        const i = S.map.virtualClusters.indexOf(tr.dataset.vc);
        const sw = tr.querySelector('.swatch');
        if (sw) sw.style.background = colour(i);
      }
    }
    renderCharts();
  }

  const CHART = { used: '#0072B2', lent: '#E69F00', unavailable: '#3b3b3b', free: '#e3e3e3', opp: '#D55E00' };

  function renderCharts() {
    const h = S.history;
    const box = $('vcCharts');
    if (!h || !h.times || !h.times.length) { box.textContent = 'No samples yet: the scheduler samples every 15 seconds.'; return; }
    const W = 360, H = 90, L = 30, B = 16;
    const n = h.times.length;
    const x = (i) => L + (n === 1 ? W - L : ((W - L) * i) / (n - 1));
    const parts = [];
    const secs = Math.max(0, (Date.parse(h.times[n - 1]) - Date.parse(h.times[0])) / 1000);
    const span = secs < 90 ? `${Math.round(secs)} s` : `${Math.round(secs / 60)} min`;
    const names = Object.keys(h.virtualClusters).sort();
    for (const name of names) {
      const s = h.virtualClusters[name];
      const max = Math.max(1, ...s.map((c) => Math.max(c.total || 0, c.opportunistic || 0)));
      const yv = (v) => H - B - ((H - B - 4) * v) / max;
      const layers = ['used', 'lent', 'unavailable', 'free'];
      let paths = '';
      const base = new Array(n).fill(0);
      for (const k of layers) {
        const top = s.map((c, i) => base[i] + (c[k] || 0));
        let d = `M${x(0)},${yv(top[0])}`;
        for (let i = 1; i < n; i++) d += `L${x(i)},${yv(top[i])}`;
        for (let i = n - 1; i >= 0; i--) d += `L${x(i)},${yv(base[i])}`;
        paths += `<path d="${d}Z" fill="${CHART[k]}"${k === 'lent' ? ' fill-opacity="0.85"' : ''}/>`;
        for (let i = 0; i < n; i++) base[i] = top[i];
      }
      let line = `M${x(0)},${yv(s[0].opportunistic || 0)}`;
      for (let i = 1; i < n; i++) line += `L${x(i)},${yv(s[i].opportunistic || 0)}`;
      paths += `<path d="${line}" fill="none" stroke="${CHART.opp}" stroke-width="2" stroke-dasharray="5 2"/>`;
      const last = s[n - 1];
      const usedVals = s.map((c) => c.used || 0);
      const label = `${name}, last ${span}: now ${last.used || 0} used, ${last.lent || 0} lent, ` +
        `${last.unavailable || 0} unavailable, ${last.free || 0} free of ${last.total || 0}; its opportunistic use ${last.opportunistic || 0}; ` +
        `used between ${Math.min(...usedVals)} and ${Math.max(...usedVals)}`;
      const axis = `<line x1="${L}" y1="${H - B}" x2="${W}" y2="${H - B}" stroke="#8c959f"/><text x="${L}" y="${H - 3}" font-size="10">${esc(span)} ago</text>` +
        `<text x="${W}" y="${H - 3}" font-size="10" text-anchor="end">now</text><text x="${L - 4}" y="${yv(max) + 8}" font-size="10" text-anchor="end">${max}</text><text x="${L - 4}" y="${H - B}" font-size="10" text-anchor="end">0</text>`;
      const step = Math.max(1, Math.ceil(n / 12));
      const trs = [];
      for (let i = 0; i < n; i += step) {
        const c = s[i];
        trs.push(`<tr><td>${esc(clock(new Date(h.times[i])))}</td><td class="num">${c.total || 0}</td><td class="num">${c.used || 0}</td><td class="num">${c.lent || 0}</td><td class="num">${c.unavailable || 0}</td><td class="num">${c.free || 0}</td><td class="num">${c.opportunistic || 0}</td></tr>`);
      }
      parts.push(`<figure class="chart"><h3>${esc(name)}</h3><svg width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)}"><title>${esc(label)}</title>${paths}${axis}</svg>` +
        `<details><summary>Data table</summary><table><thead><tr><th>Time</th><th class="num">Total</th><th class="num">Used</th><th class="num">Lent</th><th class="num">Unavailable</th><th class="num">Free</th><th class="num">Opportunistic</th></tr></thead><tbody>${trs.join('')}</tbody></table></details></figure>`);
    }
    const key = Object.entries({ used: 'used', lent: 'lent', unavailable: 'unavailable', free: 'free' })
      .map(([k, t]) => `<span>${swatch(CHART[k])}${t}</span>`).join('') + `<span><svg width="18" height="14" aria-hidden="true"><path d="M1 7H17" stroke="${CHART.opp}" stroke-width="2" stroke-dasharray="5 2"/></svg>its opportunistic use</span>`;
    box.innerHTML = `<div class="legend">${key}</div><div class="charts">` + (parts.join('') || 'No virtual clusters.') + '</div>';
  }

  // --- affinity groups ---

  const GROUP_COLS = [
    ['name', 'Group'], ['virtualCluster', 'VC'], ['phase', 'Phase'], ['state', 'State'], ['priority', 'Priority', true],
    ['members', 'Members (bound/pods)', true], ['created', 'Age', true], ['reason', 'Why it waits, or how it ended'],
  ];

  function groupValue(g, key) {
    switch (key) {
      case 'members': return g.boundPods || 0;
      case 'created': return g.created ? -Date.parse(g.created) : 0;
      case 'priority': return g.priority || 0;
    }
    return (g[key] || '').toString().toLowerCase();
  }

  function renderGroups() {
    const f = S.groupFilter.toLowerCase();
    let groups = S.groups.filter((g) => S.showFinished || !(FINISHED.has(g.phase) && !g.state));
    if (f) groups = groups.filter((g) => [g.name, g.virtualCluster, g.phase, g.state, g.reason].some((v) => (v || '').toLowerCase().includes(f)));
    const { key, dir } = S.groupSort;
    groups.sort((a, b) => {
      const va = groupValue(a, key), vb = groupValue(b, key);
      if (va < vb) return -dir;
      if (va > vb) return dir;
      return a.name < b.name ? -1 : 1;
    });
    $('groupCount').textContent = `${groups.length} of ${S.groups.length} groups`;
    const head = GROUP_COLS.map(([k, t, num]) => {
      const sort = S.groupSort.key === k ? (S.groupSort.dir > 0 ? 'ascending' : 'descending') : 'none';
      return `<th scope="col"${num ? ' class="num"' : ''} aria-sort="${sort}"><button type="button" class="sort" data-sort="${k}">${esc(t)}</button></th>`;
    }).join('') + '<th scope="col">Placement</th>';
    const rows = groups.map((g) => {
      const waiting = g.state === 'Pending' || g.state === 'Preempting' || (!g.state && !FINISHED.has(g.phase));
      const prio = g.downgraded ? `${g.priority} (downgraded)` : String(g.priority);
      let members = `${g.boundPods || 0}/${g.createdPods || 0}` + (g.memberPods && g.memberPods !== g.createdPods ? ` of ${g.memberPods}` : '');
      // An elastic gang: its minimum, then its extra pods (docs/elastic.md).
      if (g.extraPods) members = `${members} min, +${g.boundExtraPods || 0}/${g.extraPods} extra`;
      if (g.extraOf) members = `${members} (extra of ${g.extraOf})`;
      const placed = (g.pods || []).some((p) => p.node);
      const selected = S.highlight && S.highlight.group === g.name;
      return `<tr class="${waiting ? 'waiting' : ''}" data-group="${esc(g.name)}"><th scope="row">${esc(g.name)}</th><td>${esc(g.virtualCluster || '')}</td>` +
        `<td>${esc(g.phase || '')}</td><td>${esc(g.state || '-')}</td><td class="num">${esc(prio)}</td><td class="num">${esc(members)}</td>` +
        `<td class="num" title="${esc(g.created || '')}">${esc(age(g.created))}</td><td class="reason">${esc(g.reason || '')}</td>` +
        `<td>${placed ? `<button type="button" data-show="${esc(g.name)}" aria-pressed="${selected}">Show on tree</button>` : ''}</td></tr>`;
    });
    $('groupTable').innerHTML = `<table><caption>Affinity groups (gangs): click a column to sort; waiting groups are shaded.</caption><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
  }

  function highlightGroup(name) {
    const g = S.groups.find((x) => x.name === name);
    if (!g) return;
    S.highlight = { group: name, keys: new Set(), nodes: new Set() };
    refreshHighlight();
    $('highlight').hidden = false;
    $('highlightText').textContent = `${name}: ${S.highlight.keys.size} ${plural(S.highlight.keys.size, 'GPU')} on ${S.highlight.nodes.size} ${plural(S.highlight.nodes.size, 'node')} highlighted`;
    $('status').textContent = $('highlightText').textContent;
    selectTab('cells');
    const first = $('tree').querySelector('rect.leaf.hl');
    if (first) first.scrollIntoView({ block: 'center', inline: 'center' });
  }

  function refreshHighlight() {
    if (!S.highlight) return;
    const g = S.groups.find((x) => x.name === S.highlight.group);
    S.highlight.keys = new Set();
    S.highlight.nodes = new Set();
    for (const p of (g && g.pods) || []) {
      if (!p.node) continue;
      S.highlight.nodes.add(p.node);
      for (const i of p.leafCellIndices || []) S.highlight.keys.add(p.node + '#' + i);
    }
  }

  // --- events ---

  function renderEvents() {
    const rows = S.events.map((e) => `<tr><td title="${esc(e.time)}">${esc(clock(new Date(e.time)))} (${esc(age(e.time))} ago)</td>` +
      `<td>${esc(e.reason)}</td><td>${esc(e.object)}</td><td class="num">${e.count}</td><td>${esc(e.message)}</td></tr>`);
    $('eventTable').innerHTML = rows.length
      ? `<table><caption>Newest first; Count is how many pods (a gang's) the same event was about.</caption><thead><tr><th>Time</th><th>Reason</th><th>Object</th><th class="num">Count</th><th>Message</th></tr></thead><tbody>${rows.join('')}</tbody></table>`
      : '<p>No preemption, downgrade or give-up since the scheduler started.</p>';
  }

  // --- interaction ---

  function selectTab(name, focus) {
    S.tab = name;
    for (const t of document.querySelectorAll('[role="tab"]')) {
      const on = t.getAttribute('aria-controls') === name;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      if (on && focus) t.focus();
      $(t.getAttribute('aria-controls')).hidden = !on;
    }
    if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
    if (name === 'cells' && (S.treeStale || S.highlight)) renderTree();
    if (name === 'vcs' && Date.now() - S.historyAt > HISTORY_MS) refresh(true);
  }

  function toggleRack(key) {
    if (S.expanded.has(key)) S.expanded.delete(key); else S.expanded.add(key);
    renderTree();
  }

  function wire() {
    const tabs = [...document.querySelectorAll('[role="tab"]')];
    tabs.forEach((t, i) => {
      t.addEventListener('click', () => selectTab(t.getAttribute('aria-controls'), true));
      t.addEventListener('keydown', (e) => {
        let j = null;
        if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
        else if (e.key === 'ArrowLeft') j = (i + tabs.length - 1) % tabs.length;
        else if (e.key === 'Home') j = 0;
        else if (e.key === 'End') j = tabs.length - 1;
        if (j !== null) { e.preventDefault(); selectTab(tabs[j].getAttribute('aria-controls'), true); }
      });
    });
    $('live').addEventListener('click', () => {
      S.live = !S.live;
      $('live').setAttribute('aria-pressed', String(S.live));
      $('live').textContent = S.live ? 'Live' : 'Paused';
      if (S.live) refresh(true);
    });
    $('vcFilter').addEventListener('change', (e) => { S.vcFilter = e.target.value; renderTree(); });
    let typing;
    $('nodeFilter').addEventListener('input', (e) => {
      clearTimeout(typing);
      typing = setTimeout(() => { S.nodeFilter = e.target.value.trim(); renderTree(); }, 250);
    });
    $('onlyMatching').addEventListener('change', (e) => { S.onlyMatching = e.target.checked; renderTree(); });
    $('zoomIn').addEventListener('click', () => setZoom(S.zoom * 1.25));
    $('zoomOut').addEventListener('click', () => setZoom(S.zoom / 1.25));
    $('zoomReset').addEventListener('click', fit);
    $('expandAll').addEventListener('click', () => {
      S.expandAll = !S.expandAll;
      $('expandAll').textContent = S.expandAll ? 'Collapse all' : 'Expand all';
      renderTree();
    });
    $('tableView').addEventListener('click', () => {
      S.table = !S.table;
      $('tableView').setAttribute('aria-pressed', String(S.table));
      $('cellTable').hidden = !S.table;
      $('viewport').hidden = S.table;
      if (S.table) renderCellTable();
    });
    $('clearHighlight').addEventListener('click', () => {
      S.highlight = null;
      $('highlight').hidden = true;
      renderTree();
      renderGroups();
    });
    const vp = $('viewport');
    vp.addEventListener('wheel', (e) => {
      if (!e.ctrlKey) return;
      e.preventDefault();
      setZoom(S.zoom * (e.deltaY < 0 ? 1.15 : 1 / 1.15));
    }, { passive: false });
    const tree = $('tree');
    tree.addEventListener('click', (e) => {
      const node = e.target.closest('[data-node]');
      if (node) { showNode(node.dataset.node); return; }
      const rack = e.target.closest('[data-rack]');
      if (rack) toggleRack(rack.dataset.rack);
    });
    tree.addEventListener('keydown', (e) => {
      const node = e.target.closest('[data-node]');
      const rack = e.target.closest('[data-rack]');
      if (e.key === '+' || e.key === '=') { setZoom(S.zoom * 1.25); e.preventDefault(); return; }
      if (e.key === '-') { setZoom(S.zoom / 1.25); e.preventDefault(); return; }
      if (!rack) return;
      const nodes = [...rack.querySelectorAll('[data-node]')];
      if (node) {
        const i = nodes.indexOf(node);
        let j = null;
        if (e.key === 'ArrowRight' || e.key === 'ArrowDown') j = Math.min(nodes.length - 1, i + 1);
        else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') j = Math.max(0, i - 1);
        else if (e.key === 'Home') j = 0;
        else if (e.key === 'End') j = nodes.length - 1;
        else if (e.key === 'Escape') { e.preventDefault(); rack.focus(); return; }
        else if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); showNode(node.dataset.node); return; }
        if (j !== null) { e.preventDefault(); nodes[j].focus(); }
        return;
      }
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggleRack(rack.dataset.rack); return; }
      if ((e.key === 'ArrowDown' || e.key === 'ArrowRight') && nodes.length) { e.preventDefault(); nodes[0].focus(); }
    });
    $('groupTable').addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.dataset.sort) {
        const k = b.dataset.sort;
        S.groupSort = { key: k, dir: S.groupSort.key === k ? -S.groupSort.dir : 1 };
        renderGroups();
        const again = $('groupTable').querySelector(`button[data-sort="${k}"]`);
        if (again) again.focus();
      } else if (b.dataset.show) {
        highlightGroup(b.dataset.show);
      }
    });
    $('groupFilter').addEventListener('input', (e) => { S.groupFilter = e.target.value.trim(); renderGroups(); });
    $('showFinished').addEventListener('change', (e) => { S.showFinished = e.target.checked; renderGroups(); });
    document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(false); });
    window.addEventListener('hashchange', () => {
      const t = location.hash.slice(1);
      if (['cells', 'vcs', 'groups', 'events'].includes(t) && t !== S.tab) selectTab(t);
    });
  }

  function start() {
    wire();
    const t = location.hash.slice(1);
    if (['vcs', 'groups', 'events'].includes(t)) selectTab(t);
    refresh(true);
    setInterval(() => { if (!document.hidden) refresh(false); }, POLL_MS);
    setInterval(() => {
      const at = Number($('updated').dataset.at || 0);
      if (at && Date.now() - at > 3 * POLL_MS && S.live) $('updated').textContent = `last updated ${age(new Date(at).toISOString())} ago`;
    }, 1000);
  }

  // For tests and for the curious: the page's state and actions.
  window.hivesched = { state: S, refresh, highlightGroup, selectTab, showNode };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
