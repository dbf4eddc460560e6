"""The label queue page in a real headless browser (Debian's chromium and
chromedriver, driven by selenium): load the page, label cases the ways a
person does, and check the file `verifine labels import` then reads. Also
the page's API: a stale save is refused (409) and loses nothing; an invalid
label is refused with the reason."""

import json
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import verifine_bin, which

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")

CHROMIUM = which("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = which("chromedriver")


def queue_item(case_id, prompt, response, dims, total):
    return {
        "case": {"id": case_id, "scenario": "story-2", "prompt": prompt, "response": response, "reference": "#### 5"},
        "reason": "uncertain",
        "judge": {"revision": 0, "total": total, "dimensions": dims, "explanation": "steps look right"},
        "label": None,
    }


@pytest.fixture
def run_dir(tmp_path):
    judge = tmp_path / "run" / "judge"
    judge.mkdir(parents=True)
    items = [
        queue_item("r1-a-0-0", "Start with 2, add 3.", "2+3 = 5\n#### 5", {"correctness": 0.8, "clarity": 0.4}, 0.6),
        queue_item("r1-a-1-0", "Start with 4, take 1.", "#### 2", {"correctness": 0.7, "clarity": 0.5}, 0.6),
    ]
    (judge / "batch-1.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return tmp_path / "run"


def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("no chromium/chromedriver: apt-get install chromium chromium-driver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def read_queue(run_dir):
    return [json.loads(l) for l in (run_dir / "judge" / "to-label.jsonl").read_text().splitlines()]


def put(page, path, body):
    headers = {"content-type": "application/json", "cookie": page.cookie()}
    request = urllib.request.Request(f"{page.url}{path}", data=json.dumps(body).encode(), method="PUT", headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_person_labels_cases_in_the_browser(run_dir, labels_page):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    page = labels_page(run_dir)
    driver = browser()
    try:
        driver.get(page.printed_url())
        # A save replaces its case's card: an element found just before may go stale.
        wait = WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.case"))
        assert "0 of 2 labelled" in driver.find_element(By.ID, "summary").text

        first = driver.find_element(By.CSS_SELECTOR, 'section[data-case="r1-a-0-0"]')
        assert "2+3 = 5" in first.text and "steps look right" in first.text
        Select(first.find_element(By.NAME, "action")).select_by_value("change")
        clarity = first.find_element(By.CSS_SELECTOR, 'input[data-dimension="clarity"]')
        clarity.clear()
        clarity.send_keys("0.9")
        first.find_element(By.CSS_SELECTOR, "button.save").click()
        wait.until(lambda d: "saved" in d.find_element(By.CSS_SELECTOR, 'section[data-case="r1-a-0-0"] .status').text)

        second = driver.find_element(By.CSS_SELECTOR, 'section[data-case="r1-a-1-0"]')
        Select(second.find_element(By.NAME, "action")).select_by_value("clarify")
        second.find_element(By.NAME, "criterion").send_keys("correctness")
        second.find_element(By.NAME, "note").send_keys("An answer of 2 to 4-1 is wrong whatever the steps.")
        second.find_element(By.CSS_SELECTOR, "button.save").click()
        wait.until(lambda d: "saved" in d.find_element(By.CSS_SELECTOR, 'section[data-case="r1-a-1-0"] .status').text)
        assert "2 of 2 labelled" in driver.find_element(By.ID, "summary").text

        # A change of more than one dimension is caught before it is sent.
        first = driver.find_element(By.CSS_SELECTOR, 'section[data-case="r1-a-0-0"]')
        for name, value in (("clarity", "0.1"), ("correctness", "0.1")):
            field = first.find_element(By.CSS_SELECTOR, f'input[data-dimension="{name}"]')
            field.clear()
            field.send_keys(value)
        first.find_element(By.CSS_SELECTOR, "button.save").click()
        assert "exactly one dimension" in first.find_element(By.CSS_SELECTOR, ".status").text
    finally:
        driver.quit()

    items = {i["case"]["id"]: i for i in read_queue(run_dir)}
    assert items["r1-a-0-0"]["label"] == {"action": "change", "dimension": "clarity", "score": 0.9}
    assert items["r1-a-1-0"]["label"]["action"] == "clarify"
    assert items["r1-a-1-0"]["label"]["criterion"] == "correctness"

    # What the page saved is what `verifine labels import` reads.
    imported = subprocess.run(
        [str(verifine_bin()), "labels", "import", str(run_dir), str(run_dir / "judge" / "to-label.jsonl")],
        capture_output=True, text=True, check=True,
    )
    summary = json.loads(imported.stdout)
    assert summary["labelled"] == 2 and summary["clarified"] == 1

    # After the import, the person may revise their label on the page.
    status, saved = put(page, "/api/cases/r1-a-0-0", {"version": 1, "label": {"action": "revise", "dimensions": {"correctness": 1.0, "clarity": 0.7}, "note": "second look"}})
    assert status == 200, saved
    assert saved["version"] == 2


def test_stale_and_invalid_saves_are_refused_and_lose_nothing(run_dir, labels_page):
    page = labels_page(run_dir)
    url = "/api/cases/r1-a-0-0"
    status, first = put(page, url, {"version": 0, "label": {"action": "confirm"}})
    assert status == 200 and first["version"] == 1
    # A second person who loaded version 0 saves later: refused, with what is saved.
    status, conflict = put(page, url, {"version": 0, "label": {"action": "change", "dimension": "clarity", "score": 0.0}})
    assert status == 409
    assert conflict["current"]["item"]["label"] == {"action": "confirm"}
    assert read_queue(run_dir)[0]["label"] == {"action": "confirm"}
    status, invalid = put(page, url, {"version": 1, "label": {"action": "change", "dimension": "clarity", "score": 1.5}})
    assert status == 422 and "outside [0, 1]" in invalid["error"]
    status, unknown = put(page, url, {"version": 1, "label": {"action": "change", "dimension": "tone", "score": 0.5}})
    assert status == 422 and "unknown dimension" in unknown["error"]
    status, _ = put(page, "/api/cases/nope", {"version": 0, "label": None})
    assert status == 404
    assert read_queue(run_dir)[0]["label"] == {"action": "confirm"}
