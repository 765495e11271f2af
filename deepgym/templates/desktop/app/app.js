// signup_form: a sign-up page. Every submission is sent to the recorder with the form's values; the
// verifier compares the one submission with the variant's parameters.
deepgym.config().then(() => {
  const form = () => ({
    name: document.getElementById('name').value,
    email: document.getElementById('email').value,
    password: document.getElementById('password').value,
    plan: (document.querySelector('input[name=plan]:checked') || {}).value || null,
    newsletter: document.getElementById('newsletter').checked,
    terms: document.getElementById('terms').checked,
  });
  document.getElementById('submit').addEventListener('click', () => {
    const values = form();
    deepgym.send({type: 'submit', form: values});
    document.getElementById('message').textContent =
      values.terms ? 'Thanks, ' + values.name + '! Your account is ready.' : 'Please accept the terms.';
  });
  deepgym.send({type: 'ready'});
});
