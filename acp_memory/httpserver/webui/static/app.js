// The acp-memory web page: one more client of the HTTP API (the routes any script uses).
// Text from notes, messages and logs only ever reaches the page as text nodes; the one piece
// of HTML taken from outside is a note rendered by the server's safe markdown route.
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  token: sessionStorage.getItem('acp-memory-token') || '',
  server: null,          // GET /coddy/server
  session: null,         // the session of the chat, the notes and the tasks
  transcriptOf: null,    // a child session shown read-only instead of the chat
  events: null,          // AbortController of the events stream
  turnRunning: false,
  memoryWorking: false,
  memoryLine: '',
  target: { root: 'global', path: '' },  // where New note / New folder create
  selected: null,        // {root, path, type} of the selected tree entry
  note: null,            // {root, path, content} open in the viewer
  tasks: new Map(),      // task id -> record
  openTasks: new Set(),  // cards opened by the person
  poll: null,
  settings: null,        // GET /coddy/settings/memory
};

// -- the API ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

function authHeaders() {
  return state.token ? { Authorization: `Bearer ${state.token}` } : {};
}

async function api(path, { method = 'GET', body, query } = {}) {
  const url = query ? `${path}?${new URLSearchParams(query)}` : path;
  const headers = authHeaders();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(`the server cannot be reached (${err.message})`, 0);
  }
  const data = await resp.json().catch(() => null);
  if (resp.status === 401) $('token-form').hidden = false;
  if (!resp.ok) throw new ApiError(data?.error?.message || `${resp.status} ${resp.statusText}`, resp.status);
  return data;
}

const sessionUrl = (what = '') => `/coddy/sessions/${state.session}${what}`;

// -- small DOM helpers ------------------------------------------------------------------------

function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, '');
    else if (value !== false && value != null) node.setAttribute(key, value);
  }
  node.append(...children.flat().filter((c) => c != null));  // strings become text nodes
  return node;
}

function say(id, text, isError = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle('error', isError);
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function seconds(s) {
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 120) return `${Math.round(s)}s`;
  return `${Math.floor(s / 60)}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

function showStatus() {
  let text = state.memoryLine;
  if (state.memoryWorking) text = 'Working with memory';
  else if (state.turnRunning) text = 'Answering…';
  say('status', text);
}

// -- where we are: #session=<id>[&transcript=<child id>] ---------------------------------------

function hashParams() {
  return new URLSearchParams(location.hash.slice(1));
}

async function route() {
  const params = hashParams();
  const session = params.get('session');
  if (!session) {
    await chooseSession();
    return;
  }
  if (session !== state.session) await openSession(session);
  state.transcriptOf = params.get('transcript');
  await showChat();
}

async function chooseSession() {
  const { sessions } = await api('/coddy/sessions');
  const id = sessions.length ? sessions[0].id : (await newSession()).id;
  location.replace(`#session=${id}`);  // hashchange routes there
}

async function newSession() {
  return api('/coddy/sessions', { method: 'POST', body: { cwd: state.server.cwd } });
}

async function openSession(id) {
  state.session = id;
  state.tasks.clear();
  state.openTasks.clear();
  state.memoryLine = '';
  $('tasks-running').replaceChildren();
  $('tasks-finished').replaceChildren();
  closeNote();
  $('search-results').hidden = true;
  await Promise.all([fillSessions(), loadRoots(), refreshTasks(), refreshTrust()]);
  follow(id);
}

async function fillSessions() {
  const { sessions } = await api('/coddy/sessions');
  if (!sessions.some((s) => s.id === state.session)) {
    sessions.unshift({ id: state.session, title: '', cwd: '' });
  }
  $('session-select').replaceChildren(...sessions.map((s) => h('option', {
    value: s.id, selected: s.id === state.session,
  }, `${s.title || 'untitled'} · ${s.id.slice(5, 13)}${s.cwd ? ` · ${s.cwd}` : ''}`)));
}

// -- notes ------------------------------------------------------------------------------------

async function loadRoots() {
  const { roots } = await api(sessionUrl('/memory/tree'));
  // A shared root is the team's notes: its name says whose (the project key).
  $('tree').replaceChildren(...roots.map((r) => folderItem(
    r.root, '', r.shared ? `${r.root} (shared: ${r.shared})` : r.root, r.dir)));
  selectEntry({ root: roots[0].root, path: '', type: 'dir' });
}

function folderItem(root, path, name, dir) {
  const children = h('ul', { hidden: true });
  const button = h('button', {
    type: 'button', class: `node dir${path ? '' : ' root'}`, 'aria-expanded': 'false',
    dataset: { root, path, type: 'dir' },
    onclick: () => toggleFolder(button, children),
  }, name, dir ? h('span', { class: 'where' }, dir) : null);
  return h('li', {}, button, children);
}

function fileItem(root, path, name) {
  const button = h('button', {
    type: 'button', class: 'node file', dataset: { root, path, type: 'file' },
    onclick: () => openNote(root, path),
  }, name);
  return h('li', {}, button);
}

async function toggleFolder(button, children) {
  const { root, path } = button.dataset;
  selectEntry({ root, path, type: 'dir' });
  const open = button.getAttribute('aria-expanded') !== 'true';
  if (open) await loadFolder(button, children);
  button.setAttribute('aria-expanded', String(open));
  children.hidden = !open;
}

async function loadFolder(button, children) {
  const { root, path } = button.dataset;
  try {
    const { entries } = await api(sessionUrl('/memory/tree'), { query: { root, path } });
    children.replaceChildren(...entries.map((e) => (e.type === 'dir'
      ? folderItem(root, e.path, e.name) : fileItem(root, e.path, e.name))));
    if (!entries.length) children.append(h('li', { class: 'empty' }, 'empty'));
  } catch (err) {
    say('tree-message', err.message, true);
  }
}

function folderButton(root, path) {
  return [...document.querySelectorAll('#tree .node.dir')]
    .find((b) => b.dataset.root === root && b.dataset.path === path);
}

async function reloadFolder(root, path) {
  const button = folderButton(root, path);
  if (!button) return;
  await loadFolder(button, button.nextElementSibling);
  button.setAttribute('aria-expanded', 'true');
  button.nextElementSibling.hidden = false;
}

const parentOf = (path) => path.split('/').slice(0, -1).join('/');

function selectEntry(entry) {
  state.selected = entry;
  state.target = entry.type === 'dir' ? entry : { root: entry.root, path: parentOf(entry.path) };
  for (const b of document.querySelectorAll('#tree .node')) {
    const on = b.dataset.root === entry.root && b.dataset.path === entry.path;
    if (on) b.setAttribute('aria-current', 'true'); else b.removeAttribute('aria-current');
  }
  $('target-label').textContent = `${state.target.root}:${state.target.path || '/'}`;
  const isRoot = entry.path === '';
  const del = $('delete-selected');
  del.disabled = isRoot;  // a root is never deleted
  del.textContent = isRoot ? 'Delete…' : `Delete ${entry.path.split('/').pop()}…`;
}

async function openNote(root, path) {
  selectEntry({ root, path, type: 'file' });
  try {
    const note = await api(sessionUrl('/memory/file'), { query: { root, path } });
    await showNote(note);
    say('note-message', '');
  } catch (err) {
    say('tree-message', err.message, true);
  }
}

async function showNote(note) {
  state.note = note;
  $('note').hidden = false;
  $('note-path').textContent = `${note.root}:${note.path}`;
  $('note-raw').textContent = note.content;
  const { html } = await api('/coddy/markdown', { method: 'POST', body: { text: note.content } });
  $('note-rendered').innerHTML = html;  // the server's safe subset: its own text is escaped
  $('note-editor').hidden = true;
  showView(!$('note-raw').hidden);
  showHistory(note);  // history.js
}

function showView(raw) {
  $('note-rendered').hidden = raw;
  $('note-raw').hidden = !raw;
  $('show-rendered').setAttribute('aria-pressed', String(!raw));
  $('show-raw').setAttribute('aria-pressed', String(raw));
}

function closeNote() {
  state.note = null;
  $('note').hidden = true;
}

function editNote() {
  $('note-text').value = state.note.content;
  $('note-editor').hidden = false;
  $('note-rendered').hidden = true;
  $('note-raw').hidden = true;
  $('note-text').focus();
}

async function saveNote(event) {
  event.preventDefault();
  const { root, path } = state.note;
  const content = $('note-text').value;
  try {
    const saved = await api(sessionUrl('/memory/file'), { method: 'PUT', body: { root, path, content } });
    await showNote(saved);
    const redacted = saved.redacted || [];
    if (redacted.length) {
      say('note-message', `Saved, with secrets redacted (${redacted.join(', ')}): the note holds `
        + '[REDACTED:…] where they were. Keep secrets out of notes.', true);
    } else {
      say('note-message', `Saved ${root}:${saved.path}.`);
    }
  } catch (err) {
    // The text stays in the editor, so nothing typed is lost.
    say('note-message', `Not saved: ${err.message}`, true);
  }
}

async function createEntry(event) {
  event.preventDefault();
  const kind = event.submitter?.value || 'note';
  const name = $('new-name').value.trim();
  if (!name) {
    say('tree-message', `Give the new ${kind} a name first.`, true);
    $('new-name').focus();
    return;
  }
  const { root } = state.target;
  const prefix = state.target.path ? `${state.target.path}/` : '';
  try {
    if (kind === 'folder') {
      await api(sessionUrl('/memory/dir'), { method: 'POST', body: { root, path: prefix + name } });
    } else {
      const file = /\.(md|txt)$/i.test(name) ? name : `${name}.md`;
      const title = file.replace(/\.(md|txt)$/i, '');
      const note = await api(sessionUrl('/memory/file'), {
        method: 'PUT', body: { root, path: prefix + file, content: `# ${title}\n` },
      });
      await showNote(note);
      editNote();
    }
    $('new-name').value = '';
    await reloadFolder(root, state.target.path);
    say('tree-message', `Created ${root}:${prefix}${name}.`);
  } catch (err) {
    say('tree-message', err.message, true);
  }
}

async function deleteSelected() {
  const entry = state.selected;
  if (!entry || !entry.path) return;
  const what = entry.type === 'dir' ? 'the folder and every note in it' : 'the note';
  if (!confirm(`Delete ${entry.root}:${entry.path}, ${what}? Recently deleted can restore it.`)) return;
  try {
    const result = await api(sessionUrl('/memory/file'), {
      method: 'DELETE', query: { root: entry.root, path: entry.path },
    });
    if (state.note && state.note.root === entry.root
        && (state.note.path === entry.path || state.note.path.startsWith(`${entry.path}/`))) {
      closeNote();
    }
    say('tree-message', `Deleted ${entry.root}:${entry.path} (${plural(result.deleted, 'note')}).`);
    const parent = parentOf(entry.path);
    await reloadFolder(entry.root, parent);
    selectEntry({ root: entry.root, path: parent, type: 'dir' });
    await refreshTrust();
  } catch (err) {
    say('tree-message', err.message, true);
  }
}

async function search(event) {
  event.preventDefault();
  const q = $('search-q').value.trim();
  const box = $('search-results');
  if (!q) {
    box.hidden = true;
    return;
  }
  try {
    const { hits, offline } = await api(sessionUrl('/memory/search'), { query: { q } });
    box.replaceChildren(
      h('p', { class: 'hint' },
        hits.length ? `${plural(hits.length, 'note')} for “${q}”` : `No note matches “${q}”.`,
        offline ? ` (${offline})` : ''),
      h('ol', {}, hits.map((hit) => h('li', {},
        h('button', { type: 'button', class: 'hit', onclick: () => openNote(hit.root, hit.path) },
          `${hit.root}:${hit.path}`),
        h('p', { class: 'snippet' }, hit.runs.map((r) => (r.match ? h('mark', {}, r.text) : r.text))),
      ))),
    );
  } catch (err) {
    box.replaceChildren(h('p', { class: 'message error' }, err.message));
  }
  box.hidden = false;
}

// -- chat -------------------------------------------------------------------------------------

async function showChat() {
  const child = state.transcriptOf;
  const sid = child || state.session;
  $('composer').hidden = Boolean(child);
  $('read-only').hidden = !child;
  $('transcript-banner').hidden = !child;
  $('back-to-chat').href = `#session=${state.session}`;
  try {
    const [info, { messages }] = await Promise.all([
      api(`/coddy/sessions/${sid}`), api(`/coddy/sessions/${sid}/messages`),
    ]);
    if (child) {
      const who = info.subagentName === 'memory' ? 'the memory run' : `the ${info.subagentName} agent`;
      $('transcript-banner').textContent = `Transcript of ${who} ${info.subagentTaskId || ''}, read-only.`;
      $('chat-title').textContent = 'Transcript';
    } else {
      $('chat-title').textContent = 'Chat';
    }
    renderTranscript(messages);
  } catch (err) {
    $('transcript').replaceChildren(h('li', { class: 'message error' }, err.message));
  }
  if (child) showPanel('chat');
}

function renderTranscript(messages) {
  const list = $('transcript');
  const calls = new Map();
  list.replaceChildren();
  for (const m of messages) {
    if (m.role === 'user') {
      list.append(messageItem('user', m.content));
    } else if (m.role === 'assistant') {
      const item = messageItem('assistant', m.content);
      for (const call of m.toolCalls || []) {
        const box = toolBox(call.id, call.title || call.name, call.arguments);
        calls.set(call.id, box);
        item.append(box);
      }
      list.append(item);
    } else if (m.role === 'tool') {
      const box = calls.get(m.toolCallId);
      if (box) finishTool(box, m.isError ? 'failed' : 'completed', m.content);
    }
  }
  list.lastElementChild?.scrollIntoView({ block: 'end' });
}

function messageItem(role, text) {
  return h('li', { class: `msg ${role}` },
    h('span', { class: 'who' }, role === 'user' ? 'You' : 'Agent'),
    h('div', { class: 'text' }, text || ''));
}

function toolBox(id, title, args) {
  const input = typeof args === 'string' ? args : JSON.stringify(args ?? {}, null, 1);
  return h('details', { class: 'tool', dataset: { call: id } },
    h('summary', {},
      h('span', { class: 'tool-title' }, title), ' ', h('span', { class: 'tool-status' }, 'running')),
    h('pre', { class: 'tool-in' }, input),
    h('pre', { class: 'tool-out' }));
}

function finishTool(box, status, output) {
  box.querySelector('.tool-status').textContent = status;
  box.querySelector('.tool-out').textContent = output || '';
  box.classList.toggle('failed', status === 'failed');
}

function liveAssistant() {
  const list = $('transcript');
  const last = list.lastElementChild;
  if (last && last.classList.contains('assistant') && last.classList.contains('live')) return last;
  const item = messageItem('assistant', '');
  item.classList.add('live');
  list.append(item);
  return item;
}

async function send(event) {
  event.preventDefault();
  const text = $('prompt-text').value;
  if (!text.trim() || state.turnRunning) return;
  const sid = state.session;
  $('transcript').append(messageItem('user', text));
  $('prompt-text').value = '';
  setTurn(true);
  try {
    const result = await api(sessionUrl('/prompt'), { method: 'POST', body: { text } });
    if (result.stopReason !== 'end_turn') state.memoryLine = `The turn ended: ${result.stopReason}.`;
  } catch (err) {
    state.memoryLine = `The turn failed: ${err.message}`;
  } finally {
    setTurn(false);
  }
  if (sid !== state.session) return;
  if (!state.transcriptOf) await showChat();
  await Promise.all([refreshTasks(), fillSessions()]);  // the session's title comes with a turn
}

function setTurn(running) {
  state.turnRunning = running;
  if (!running) state.memoryWorking = false;
  $('send').disabled = running;
  $('stop-turn').hidden = !running;
  showStatus();
}

// The session's events stream, read with fetch (EventSource cannot send the token).
async function follow(sid) {
  state.events?.abort();
  const control = new AbortController();
  state.events = control;
  while (!control.signal.aborted) {
    try {
      const resp = await fetch(`/coddy/sessions/${sid}/events`, {
        headers: authHeaders(), signal: control.signal,
      });
      if (!resp.ok) throw new Error(`events: ${resp.status}`);
      setLive(true);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          onFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
      }
    } catch (err) {
      if (control.signal.aborted) return;
    }
    setLive(false);
    await new Promise((resolve) => { setTimeout(resolve, 2000); });  // then reconnect
  }
}

function setLive(live) {
  $('live').textContent = live ? 'live' : 'offline';
  $('live').classList.toggle('on', live);
}

function onFrame(frame) {
  const data = frame.split('\n').find((line) => line.startsWith('data: '));
  if (!data) return;  // a ping
  const update = JSON.parse(data.slice(6));
  const viewingChat = !state.transcriptOf;
  switch (update.sessionUpdate) {
    case 'agent_message_chunk':
      if (viewingChat) liveAssistant().querySelector('.text').append(update.content?.text || '');
      break;
    case 'tool_call':
      if (viewingChat) liveAssistant().append(toolBox(update.toolCallId, update.title, update.rawInput));
      break;
    case 'tool_call_update': {
      const box = document.querySelector(`#transcript details[data-call="${CSS.escape(update.toolCallId)}"]`);
      if (box && update.status) {
        const text = (update.content || []).map((c) => c.content?.text || '').join('\n');
        finishTool(box, update.status, text);
      }
      break;
    }
    case 'memory_run':
      onMemoryRun(update);
      break;
    default:
      break;
  }
}

function onMemoryRun(update) {
  if (update.status === 'started') {
    state.memoryWorking = true;
    state.memoryLine = '';
  } else {
    state.memoryWorking = false;
    state.memoryLine = memoryLine(update);
    refreshTrust();  // the run may have deleted a note, or held a change for approval
  }
  showStatus();
  refreshTasks();
}

function memoryLine(u) {
  if (u.status === 'skipped') return `memory: skipped - ${u.reason}`;
  const took = seconds((u.durationMs || 0) / 1000);
  const task = `(task ${u.taskId})`;
  if (u.taskStatus !== 'succeeded') {
    return `memory: ${u.taskStatus} after ${took} ${task}${u.reason ? ` - ${u.reason}` : ''}`;
  }
  if (u.delivered) return `memory: recalled in ${took} ${task}`;
  return `memory: finished in ${took}, nothing reached this turn ${task}`;
}

// -- tasks drawer -----------------------------------------------------------------------------

const RUNNING = new Set(['queued', 'running']);

async function refreshTasks() {
  if (!state.session) return;
  const sid = state.session;
  let tasks;
  try {
    ({ tasks } = await api(sessionUrl('/background-tasks')));
  } catch (err) {
    return;  // the next refresh tries again
  }
  if (sid !== state.session) return;
  for (const task of tasks) {
    const before = state.tasks.get(task.id);
    state.tasks.set(task.id, task);
    renderCard(task);
    if (state.openTasks.has(task.id) && (RUNNING.has(task.status) || RUNNING.has(before?.status))) {
      loadLog(task.id);
    }
  }
  const running = tasks.filter((t) => RUNNING.has(t.status)).length;
  $('tasks-count').textContent = running ? String(running) : '';
  clearTimeout(state.poll);
  // A run that outlives its turn sends no update: while one runs, ask again.
  if (running) state.poll = setTimeout(refreshTasks, 1000);
}

function taskTag(task) {
  if (task.kind !== 'agent') return 'command';
  return task.agent?.system ? 'memory' : task.agent?.name || 'agent';
}

function taskTitle(task) {
  const name = task.agent?.name;
  const label = task.label || task.command || task.id;
  const bare = name && label.startsWith(`${name}: `) ? label.slice(name.length + 2) : label;
  return bare.split('\n')[0];
}

function renderCard(task) {
  let card = document.querySelector(`.card[data-task="${CSS.escape(task.id)}"]`);
  const created = !card;
  if (created) {
    const head = h('button', {
      type: 'button', class: 'card-head', 'aria-expanded': 'false',
      onclick: () => toggleCard(task.id),
    },
    h('span', { class: 'tag' }), h('span', { class: 'card-title' }),
    h('span', { class: 'card-status' }), h('span', { class: 'elapsed' }));
    const body = h('div', { class: 'card-body', hidden: true },
      h('p', { class: 'card-error' }), h('p', { class: 'card-cost' }), h('pre', { class: 'log' }),
      h('p', { class: 'row card-actions' }));
    card = h('li', { class: 'card', dataset: { task: task.id } }, head, body);
  }
  const tag = taskTag(task);
  card.querySelector('.tag').textContent = tag;
  card.querySelector('.tag').className = `tag${tag === 'memory' ? ' memory' : ''}`;
  card.querySelector('.card-title').textContent = taskTitle(task);
  card.querySelector('.card-status').textContent = task.status;
  card.querySelector('.card-error').textContent = task.error || '';
  // A memory run's cost is known once it ended (a record from before runs had one has none).
  card.querySelector('.card-cost').textContent =
    task.cost && !RUNNING.has(task.status) ? costLine(task.cost) : '';
  card.dataset.status = task.status;
  card.dataset.started = task.started_at || '';
  card.dataset.finished = task.finished_at || '';
  const actions = card.querySelector('.card-actions');
  actions.replaceChildren();
  if (task.agent?.session_id) {
    const href = `#session=${state.session}&transcript=${task.agent.session_id}`;
    actions.append(h('a', { href }, 'Show transcript'));
  }
  if (RUNNING.has(task.status)) {
    actions.append(h('button', { type: 'button', onclick: () => stopTask(task.id) }, 'Stop'));
  }
  // While it runs, the ticker moves the time on; a refresh sets the first and the last.
  if (created || !RUNNING.has(task.status)) tickCard(card);
  // Running first, oldest first; finished below, newest first.
  const list = RUNNING.has(task.status) ? $('tasks-running') : $('tasks-finished');
  if (card.parentElement !== list) {
    if (list === $('tasks-finished')) list.prepend(card); else list.append(card);
  }
}

// Worded as the run's log words it (TaskCost.describe in tasks/records.py).
function costLine(cost) {
  const calls = `${cost.model_calls} model call${cost.model_calls === 1 ? '' : 's'}`;
  const cached = [[cost.cached_read_tokens, 'cached'], [cost.cached_write_tokens, 'written to cache']]
    .filter(([n]) => n).map(([n, what]) => `${n} ${what}`);
  const tokensIn = `${cost.input_tokens} tokens in${cached.length ? ` (${cached.join(', ')})` : ''}`;
  // Tenths rounded half up, as the task log's line rounds them (TaskCost.describe).
  const took = (Math.round(cost.duration_ms / 100) / 10).toFixed(1);
  return `cost: ${calls}, ${tokensIn}, ${cost.output_tokens} out, ${took} s`;
}

function tickCard(card) {
  const start = Date.parse(card.dataset.started);
  if (Number.isNaN(start)) return;
  const end = card.dataset.finished ? Date.parse(card.dataset.finished) : Date.now();
  card.querySelector('.elapsed').textContent = seconds(Math.max(0, end - start) / 1000);
}

async function toggleCard(id) {
  const card = document.querySelector(`.card[data-task="${CSS.escape(id)}"]`);
  const open = !state.openTasks.has(id);
  if (open) state.openTasks.add(id); else state.openTasks.delete(id);
  card.querySelector('.card-head').setAttribute('aria-expanded', String(open));
  card.querySelector('.card-body').hidden = !open;
  if (open) await loadLog(id);
}

async function loadLog(id) {
  try {
    const { tail } = await api(sessionUrl(`/background-tasks/${id}`), { query: { tail: 2000 } });
    const card = document.querySelector(`.card[data-task="${CSS.escape(id)}"]`);
    if (card) card.querySelector('.log').textContent = tail || '(nothing logged yet)';
  } catch (err) {
    say('status', err.message, true);
  }
}

async function stopTask(id) {
  try {
    await api(sessionUrl(`/background-tasks/${id}/stop`), { method: 'POST' });
  } catch (err) {
    say('status', err.message, true);
  }
  await refreshTasks();
}

function toggleDrawer(open) {
  $('drawer').hidden = !open;
  document.body.classList.toggle('drawer-open', open);
  $('tasks-toggle').setAttribute('aria-expanded', String(open));
  if (open) {
    refreshTasks();
    $('drawer-close').focus();
  } else {
    $('tasks-toggle').focus();
  }
}

// -- settings ---------------------------------------------------------------------------------

const NUMBERS = ['wait_seconds', 'timeout_seconds', 'keep_runs', 'additional_prompt_max_chars'];

async function openSettings() {
  say('settings-message', '');
  try {
    state.settings = await api('/coddy/settings/memory');
  } catch (err) {
    say('status', err.message, true);
    return;
  }
  fillSettings(state.settings);
  $('settings').showModal();
}

function fillSettings(settings) {
  const { values, models } = settings;
  const form = $('settings-form');
  const created = settings.exists ? '' : ' (created by the first save)';
  $('config-file').textContent = settings.configFile + created;
  form.elements.enable.checked = values.enable === true;
  const choices = ['', ...models];
  if (!choices.includes(values.model)) choices.push(values.model);  // a ${VAR}, say
  $('s-model').replaceChildren(...choices.map((m) => h('option', { value: m, selected: m === values.model },
    m || "the session's model")));
  form.elements.fallback_models.value = Array.isArray(values.fallback_models)
    ? values.fallback_models.join(', ') : String(values.fallback_models ?? '');
  for (const key of NUMBERS) form.elements[key].value = String(values[key] ?? '');
  form.elements.additional_prompt.value = values.additional_prompt ?? '';
  countPrompt();
}

function countPrompt() {
  const form = $('settings-form');
  const chars = [...form.elements.additional_prompt.value.trim()].length;
  const cap = Number(form.elements.additional_prompt_max_chars.value);
  let text = plural(chars, 'character');
  if (cap > 0) text += chars > cap ? ` of ${cap}: past the cap, the text is cut at ${cap}` : ` of ${cap}`;
  say('s-prompt-count', text, cap > 0 && chars > cap);
}

// A number typed is sent as one; anything else (a ${VAR}, a typo) goes as text, for the
// server to accept or name.
function numberOrText(value) {
  const text = value.trim();
  return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
}

async function saveSettings(event) {
  event.preventDefault();
  const form = $('settings-form');
  const values = {
    enable: form.elements.enable.checked,
    model: form.elements.model.value,
    fallback_models: form.elements.fallback_models.value.split(',').map((m) => m.trim()).filter(Boolean),
    additional_prompt: form.elements.additional_prompt.value,
  };
  for (const key of NUMBERS) values[key] = numberOrText(form.elements[key].value);
  try {
    state.settings = await api('/coddy/settings/memory', {
      method: 'PUT', body: { values, revision: state.settings.revision },
    });
    fillSettings(state.settings);
    say('settings-message', `Saved to ${state.settings.configFile}; new turns use it.`);
  } catch (err) {
    say('settings-message', `Not saved: ${err.message}`, true);
  }
}

// -- panels and start -------------------------------------------------------------------------

function showPanel(view) {
  $('main').dataset.view = view;
  for (const b of document.querySelectorAll('.views button')) {
    b.setAttribute('aria-pressed', String(b.dataset.view === view));
  }
}

function wire() {
  window.addEventListener('hashchange', () => route().catch(fail));
  $('session-select').addEventListener('change', (e) => { location.hash = `session=${e.target.value}`; });
  $('new-session').addEventListener('click', async () => {
    try {
      location.hash = `session=${(await newSession()).id}`;
    } catch (err) { fail(err); }
  });
  for (const b of document.querySelectorAll('.views button')) {
    b.addEventListener('click', () => showPanel(b.dataset.view));
  }
  $('tasks-toggle').addEventListener('click', () => toggleDrawer($('drawer').hidden));
  $('drawer-close').addEventListener('click', () => toggleDrawer(false));
  $('drawer').addEventListener('keydown', (e) => { if (e.key === 'Escape') toggleDrawer(false); });
  $('settings-open').addEventListener('click', openSettings);
  $('settings-close').addEventListener('click', () => $('settings').close());
  $('settings-form').addEventListener('submit', saveSettings);
  $('settings-form').elements.additional_prompt.addEventListener('input', countPrompt);
  $('settings-form').elements.additional_prompt_max_chars.addEventListener('input', countPrompt);
  $('search-form').addEventListener('submit', search);
  $('create-form').addEventListener('submit', createEntry);
  $('delete-selected').addEventListener('click', deleteSelected);
  $('show-rendered').addEventListener('click', () => showView(false));
  $('show-raw').addEventListener('click', () => showView(true));
  $('edit-note').addEventListener('click', editNote);
  $('cancel-edit').addEventListener('click', () => showNote(state.note));
  $('note-editor').addEventListener('submit', saveNote);
  $('composer').addEventListener('submit', send);
  $('prompt-text').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('composer').requestSubmit();
  });
  $('stop-turn').addEventListener('click', () => api(sessionUrl('/cancel'), { method: 'POST' }).catch(fail));
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    state.token = $('token-input').value.trim();
    sessionStorage.setItem('acp-memory-token', state.token);
    $('token-form').hidden = true;
    start();
  });
  // The elapsed time of running cards.
  setInterval(() => document.querySelectorAll('.card[data-status="running"]').forEach(tickCard), 200);
}

function fail(err) {
  say('status', err.message, true);
}

async function start() {
  // A token given in the address (#token=...) is kept for this tab and taken out of sight.
  const params = hashParams();
  if (params.has('token')) {
    state.token = params.get('token');
    sessionStorage.setItem('acp-memory-token', state.token);
    params.delete('token');
    history.replaceState(null, '', `${location.pathname}${location.search}#${params}`);
  }
  try {
    state.server = await api('/coddy/server');
    await route();
  } catch (err) {
    fail(err);
  }
}

wire();
start();
