// expense_sheet: one amount per expense, a running total, and a Submit button. Each submission is sent with
// every row's amount as typed; the verifier parses them.
deepgym.config().then(({params}) => {
  const rows = document.getElementById('rows');
  const inputs = params.items.map((name, index) => {
    const top = 120 + 60 * index;
    const label = document.createElement('div');
    label.className = 'item';
    label.style.top = (top + 8) + 'px';
    label.textContent = name;
    const input = document.createElement('input');
    input.className = 'amount';
    input.style.top = top + 'px';
    input.autocomplete = 'off';
    rows.append(label, input);
    return input;
  });
  const total = () => inputs.reduce((sum, input) => sum + (parseFloat(input.value) || 0), 0);
  for (const input of inputs) {
    input.addEventListener('input', () => {
      document.getElementById('total').textContent = 'Total: ' + total().toFixed(2);
    });
  }
  document.getElementById('submit').addEventListener('click', () => {
    const amounts = Object.fromEntries(params.items.map((name, index) => [name, inputs[index].value]));
    deepgym.send({type: 'submit', amounts, total: total().toFixed(2)});
    document.getElementById('message').textContent = 'Report submitted.';
  });
  deepgym.send({type: 'ready'});
});
