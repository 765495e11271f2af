// todo_list: a to-do list that starts with the variant's items. Every change is sent to the recorder as an
// event and as the whole list after it; the verifier reads both.
deepgym.config().then(({params}) => {
  let items = params.items.map((text, id) => ({id, text, done: false}));
  let next = items.length;
  const list = document.getElementById('items');
  const input = document.getElementById('new');
  const changed = (event) => {
    deepgym.send(event);
    deepgym.send({type: 'state', items: items.map((item) => ({...item}))});
    render();
  };
  const render = () => {
    list.replaceChildren(...items.map((item) => {
      const row = document.createElement('li');
      row.className = item.done ? 'done' : '';
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.checked = item.done;
      box.addEventListener('change', () => { item.done = box.checked; changed({type: 'toggle', id: item.id, done: item.done}); });
      const label = document.createElement('span');
      label.textContent = item.text;
      const remove = document.createElement('button');
      remove.textContent = 'Delete';
      remove.addEventListener('click', () => { items = items.filter((x) => x !== item); changed({type: 'delete', id: item.id}); });
      row.append(box, label, remove);
      return row;
    }));
  };
  const add = () => {
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    const item = {id: next++, text, done: false};
    items.push(item);
    changed({type: 'add', id: item.id, text});
  };
  document.getElementById('add').addEventListener('click', add);
  input.addEventListener('keydown', (event) => { if (event.key === 'Enter') add(); });
  render();
  deepgym.send({type: 'state', items: items.map((item) => ({...item}))});
  deepgym.send({type: 'ready'});
});
