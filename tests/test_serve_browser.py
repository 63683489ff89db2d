"""The server's page (GET /) in a real headless browser: Debian's chromium driven by
Selenium through /usr/bin/chromedriver (no browser download). A sentence typed and
submitted shows the translation the predict API gives, and its n-best list.

Needs `apt-get install chromium chromium-driver`; skips with the reason without them."""

import json
import os

import httpx
import pytest

from serve_util import running
from t2t_repro.serving.servable import Servable

_CHROMIUM, _CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(name="browser")
def fixture_browser(tmp_path):
  """A headless Chromium with a new empty profile, no network of its own beyond loopback."""
  if not (os.path.exists(_CHROMIUM) and os.path.exists(_CHROMEDRIVER)):
    pytest.skip(f"{_CHROMIUM} or {_CHROMEDRIVER} is absent (apt-get install chromium "
                "chromium-driver)")
  webdriver = pytest.importorskip("selenium.webdriver")
  options = webdriver.ChromeOptions()
  options.binary_location = _CHROMIUM
  for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}"):
    options.add_argument(flag)
  driver = webdriver.Chrome(options=options,
                            service=webdriver.ChromeService(executable_path=_CHROMEDRIVER))
  try:
    yield driver
  finally:
    driver.quit()


def test_the_page_translates_what_is_typed(browser, exported_model):
  from selenium.webdriver.common.by import By  # pylint: disable=import-outside-toplevel
  from selenium.webdriver.support import expected_conditions  # pylint: disable=import-outside-toplevel
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=import-outside-toplevel
  sentence = "Two young men are playing soccer in a park."
  servable = Servable("transformer", 1, str(exported_model / "1"))
  with running(servable) as (base, _):
    browser.get(f"{base}/")
    assert browser.title == "t2t_repro: translate"
    source = browser.find_element(By.ID, "source")
    source.clear()
    source.send_keys(sentence)
    browser.find_element(By.ID, "translate").click()
    WebDriverWait(browser, 300).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "time"), " s"))
    assert browser.find_element(By.ID, "error").text == ""
    shown = browser.find_element(By.CSS_SELECTOR, "#results td.translation").text
    nbest = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#results .nbest li")]
    api = httpx.post(f"{base}/v1/models/transformer:predict",
                     content=json.dumps({"instances": [sentence]}), timeout=300).json()
    listed = httpx.post(f"{base}/v1/models/transformer:predict", timeout=300, content=json.dumps(
        {"signature_name": "translate_nbest", "instances": [sentence]})).json()
  expected = api["predictions"][0]["translations"]
  assert expected and shown == expected.strip()  # the browser trims what it renders
  hypotheses = listed["predictions"][0]
  assert nbest == [f"{text} ({score:.3f})".strip() for text, score in
                   zip(hypotheses["translations"], hypotheses["scores"])]
