// settings_tabs: three tabs of settings and one Save button. Each save is sent with every setting's value;
// switching tabs is sent too, so the log shows how the agent got there.
deepgym.config().then(() => {
  const radio = (name) => document.querySelector(`input[name=${name}]:checked`).value;
  const checked = (id) => document.getElementById(id).checked;
  const settings = () => ({
    theme: radio('theme'), language: radio('language'), email_alerts: checked('email_alerts'),
    push: checked('push'), digest: radio('digest'), visibility: radio('visibility'),
    search_indexing: checked('search_indexing'),
  });
  for (const tab of document.querySelectorAll('.tab')) {
    tab.addEventListener('click', () => {
      for (const other of document.querySelectorAll('.tab, .panel')) other.classList.remove('active');
      tab.classList.add('active');
      document.getElementById(tab.dataset.tab).classList.add('active');
      deepgym.send({type: 'tab', tab: tab.dataset.tab});
    });
  }
  document.getElementById('save').addEventListener('click', () => {
    deepgym.send({type: 'save', settings: settings()});
    document.getElementById('message').textContent = 'Settings saved.';
  });
  deepgym.send({type: 'ready'});
});
