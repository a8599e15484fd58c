// What the page shows of the memory history: a note's changes with an undo each, the notes and
// folders deleted lately with a restore each, and the changes held for the user's approval.
// Loaded before app.js, whose helpers (api, h, say, sessionUrl, state, ...) it calls once the
// page runs; app.js calls showHistory and refreshTrust.
'use strict';

const DELETES = new Set(['delete', 'rmdir']);

function when(iso) {
  return `${iso.replace('T', ' ').slice(0, 16)} UTC`;  // as the API says it: 2026-12-02 00:34 UTC
}

function sourceText(source) {
  const task = source.taskId ? ` ${source.taskId}` : '';
  const said = source.message ? ` · “${source.message}”` : '';
  return `${source.surface}${task}${said}`;
}

function changeItem(change, withPath, ...buttons) {
  const shown = change.action === 'rmdir' || change.action === 'mkdir' ? `${change.path}/` : change.path;
  return h('li', { class: 'change', dataset: { change: change.id, action: change.action } },
    h('p', { class: 'change-head' },
      h('span', { class: 'action' }, change.action),
      withPath ? h('span', { class: 'change-path' }, `${change.root}:${shown}`) : null,
      h('time', { datetime: change.time }, when(change.time))),
    h('p', { class: 'change-body' },
      h('span', { class: 'summary' }, change.summary), ' · ',
      h('span', { class: 'source' }, sourceText(change.source))),
    // A held change says why it was proposed, and a merge the other notes it makes with it.
    change.also ? h('ul', { class: 'change-also' }, change.also.map((part) =>
      h('li', { dataset: { action: part.action } },
        h('span', { class: 'action' }, part.action), ' ', `${change.root}:${part.path}`))) : null,
    change.reason ? h('p', { class: 'change-reason' }, `Why: ${change.reason}`) : null,
    h('p', { class: 'row change-actions' }, ...buttons),
    h('div', { class: 'conflict' }));
}

// -- a note's history -------------------------------------------------------------------------

async function showHistory(note) {
  const list = $('history-list');
  say('history-message', '');
  try {
    const { changes } = await api(sessionUrl('/memory/history'), {
      query: { root: note.root, path: note.path, limit: 20 },
    });
    if (state.note !== note) return;  // another note was opened meanwhile
    // A purge kept no content: it has nothing to put back.
    list.replaceChildren(...changes.map((c) => changeItem(c, c.path !== note.path,
      c.action === 'purge' ? null : h('button', { type: 'button', class: 'undo',
        onclick: (e) => undoChange(c, e.target, 'history-message') }, 'Undo'))));
    if (!changes.length) list.append(h('li', { class: 'empty' }, 'No recorded change yet.'));
  } catch (err) {
    say('history-message', err.message, true);
  }
}

// An undo refused over a later change (409) shows why, and offers to undo anyway.
async function undoChange(change, button, messageId, force = false) {
  const item = button.closest('.change');
  try {
    const result = await api(sessionUrl('/memory/undo'), {
      method: 'POST', body: { change_id: change.id, force },
    });
    const brought = result.restored ? `, ${plural(result.restored, 'note')} back` : '';
    const redacted = result.redacted
      ? `, restored with ${result.redacted} secret(s) redacted` : '';
    await afterChange(result.root, result.path);
    // An undo that removed the open note closed it, and its message with it.
    const shown = $(messageId).closest('[hidden]') ? 'tree-message' : messageId;
    say(shown, `Undid the ${change.action} of ${result.root}:${result.path}${brought}`
      + `${redacted}.`);
  } catch (err) {
    if (err.status !== 409 || force) {
      say(messageId, err.message, true);
      return;
    }
    item.querySelector('.conflict').replaceChildren(
      h('p', { class: 'message error' }, err.message),
      h('button', { type: 'button', class: 'undo-anyway',
        onclick: (e) => undoChange(change, e.target, messageId, true) }, 'Undo anyway'));
  }
}

// After a path changed under the page: its folder listed again, the open note read again (or
// closed when it is gone), the lists refreshed.
async function afterChange(root, path) {
  const folder = path.split('/').slice(0, -1).join('/');
  await reloadFolder(root, folder);
  const note = state.note;
  if (note && note.root === root && (note.path === path || note.path.startsWith(`${path}/`))) {
    try {
      await showNote(await api(sessionUrl('/memory/file'), { query: { root, path: note.path } }));
    } catch (err) {
      if (err.status !== 404) throw err;
      closeNote();
    }
  } else if (note) {
    await showHistory(note);
  }
  await refreshTrust();
}

// -- recently deleted and waiting for approval ------------------------------------------------

async function refreshTrust() {
  if (!state.session) return;
  await Promise.all([showDeleted(), showPending()]);
}

async function showDeleted() {
  try {
    const { changes } = await api(sessionUrl('/memory/history'), { query: { limit: 200 } });
    const undone = new Set(changes.map((c) => c.undoes).filter(Boolean));
    const deleted = changes.filter((c) => DELETES.has(c.action) && !undone.has(c.id)).slice(0, 20);
    $('deleted-list').replaceChildren(...deleted.map((c) => changeItem(c, true,
      h('button', { type: 'button', class: 'restore', onclick: (e) => undoChange(c, e.target, 'trust-message') },
        'Restore'))));
    if (!deleted.length) $('deleted-list').append(h('li', { class: 'empty' }, 'Nothing deleted lately.'));
  } catch (err) {
    say('trust-message', err.message, true);
  }
}

async function showPending() {
  try {
    const { pending } = await api(sessionUrl('/memory/pending'));
    $('pending-list').replaceChildren(...pending.map((p) => changeItem(p, true,
      h('button', { type: 'button', class: 'approve', onclick: () => decide(p, true) }, 'Approve'),
      h('button', { type: 'button', class: 'reject', onclick: () => decide(p, false) }, 'Reject'))));
    $('pending').hidden = !pending.length;
  } catch (err) {
    say('trust-message', err.message, true);
  }
}

async function decide(held, approve) {
  try {
    await api(sessionUrl(`/memory/pending/${encodeURIComponent(held.id)}`), {
      method: 'POST', body: { approve },
    });
    const where = `${held.root}:${held.path}`;
    if (approve) {
      // A merge changed its other notes too: their folders and the open note are read again.
      for (const path of [held.path, ...(held.also || []).map((part) => part.path)]) {
        await afterChange(held.root, path);
      }
    } else {
      await refreshTrust();
    }
    say('trust-message', approve ? `Approved: ${held.action} of ${where}.` : `Rejected: ${where} is unchanged.`);
  } catch (err) {
    say('trust-message', err.message, true);
  }
}
