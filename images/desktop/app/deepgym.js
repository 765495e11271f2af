// The app's side of the state recorder (deepgym_desktop.recorder), served with every desktop app.
// deepgym.config() waits for the episode's parameters; deepgym.send(event) posts one state event. Events are
// sent one after another, so the recorder logs them in the order the app made them.
// The browser's context menu (back, reload, save as, view source) is not part of any app.
document.addEventListener('contextmenu', (event) => event.preventDefault());
const deepgym = (() => {
  let chain = Promise.resolve();
  return {
    config: () => fetch('/config').then((reply) => reply.json()),
    send: (event) => {
      chain = chain.then(() => fetch('/event', {
        method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(event),
      })).catch(() => undefined);
      return chain;
    },
  };
})();
